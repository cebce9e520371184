export interface RouteOf {
  method: string;
  /** The pattern, e.g. /v1/chats/:chatKey/messages. */
  url: string;
}

/**
 * Every route an app serves (HEAD left out), read from `printRoutes`, so a test that must
 * cover every route also covers the routes added after it was written.
 */
export function routesOf(app: { printRoutes(opts: { commonPrefix: boolean }): string }): RouteOf[] {
  const routes: RouteOf[] = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+)(?: \(([^)]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    const url = `${stack.join('')}${m[2]}`;
    stack.push(m[2]!);
    for (const method of m[3]?.split(', ') ?? []) if (method !== 'HEAD') routes.push({ method, url });
  }
  return routes;
}

/** A route's URL with every parameter filled in. */
export function urlOf(pattern: string, chatKey: string): string {
  return pattern.replace(/:chatKey|:id/g, chatKey).replace(/:(\w+)/g, 'x1');
}

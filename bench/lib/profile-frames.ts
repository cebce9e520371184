/** A V8 profile's call frame (CPU and sampling heap profiles share the shape). */
export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

/** `node_modules/<pkg>` (scoped too), `chatlane:<dir>/<file>` for our own code, else node's own. */
export function ownerOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = url.slice(nm + '/node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return `chatlane:${url.slice(dist + '/dist/'.length)}`;
  if (url.startsWith('node:')) return url;
  return url;
}

import { z } from 'zod';

/**
 * How a variable's text becomes a value: the building blocks of config.ts's schemas (integers
 * with a floor, optional strings where blank means unset, flags, lists). They hold no schema:
 * each call builds a fresh one for the one parse at boot.
 */

export const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
export const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

export interface ClusterNode {
  host: string;
  port: number;
}

/** `host:port,host:port` (IPv6 as `[::1]:7000`): startup nodes of a Redis Cluster. */
export const clusterNodes = z
  .string()
  .optional()
  .transform((v, ctx): ClusterNode[] | undefined => {
    if (v === undefined || v.trim() === '') return undefined;
    const nodes: ClusterNode[] = [];
    for (const item of v.split(',').map((s) => s.trim())) {
      const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(item);
      const port = Number(m?.[3]);
      if (!m || port < 1 || port > 65535) {
        ctx.addIssue({ code: 'custom', message: `'${item}' is not host:port (comma-separated list)` });
        return z.NEVER;
      }
      nodes.push({ host: (m[1] ?? m[2])!, port });
    }
    return nodes;
  });

/** A flag variable: true/false/1/0. */
export const flag = (def: 'true' | 'false') =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(def)
    .transform((v) => v === 'true' || v === '1');

/** Comma-separated names matching `pattern`, without repeats; unset = none. */
export const nameList = (pattern: RegExp, what: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx): string[] => {
      const names = (v ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      for (const name of names) {
        if (!pattern.test(name)) ctx.addIssue({ code: 'custom', message: `'${name}' is not ${what}` });
      }
      if (new Set(names).size !== names.length)
        ctx.addIssue({ code: 'custom', message: 'lists a name twice' });
      return names;
    });

/** '250' or '100-400' (milliseconds); unset or blank means no added latency. */
export const latencyRange = z
  .string()
  .optional()
  .transform((v, ctx): [number, number] => {
    if (v === undefined || v.trim() === '') return [0, 0];
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(v);
    const min = Number(m?.[1]);
    const max = m?.[2] === undefined ? min : Number(m[2]);
    if (!m || !Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min > max) {
      ctx.addIssue({ code: 'custom', message: "must be 'n' or 'min-max' in ms with min <= max" });
      return z.NEVER;
    }
    return [min, max];
  });

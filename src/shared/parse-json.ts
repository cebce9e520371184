import type { z } from 'zod';

/**
 * A stored JSON value read back through its schema: undefined when absent, not JSON or not
 * of the schema, so that one unreadable record is skipped by its reader instead of failing it.
 */
export function parseJsonAs<T>(schema: z.ZodType<T>, raw: string | null | undefined): T | undefined {
  if (!raw) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

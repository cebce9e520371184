import { jsonSchema, type Schema, zodSchema } from 'ai';
import type { z } from 'zod';

/**
 * A tool's input schema, converted to JSON Schema once per process and validated with zod.
 * The `$schema` URL zod writes into the JSON Schema is dropped: 52 bytes of every tool in
 * every request body, which no model reads (the SDK passes the schema on as it is).
 */
export function toolInput<T>(schema: z.ZodType<T>): Schema<T> {
  const converted = zodSchema(schema);
  const { $schema: _url, ...json } = converted.jsonSchema;
  return jsonSchema<T>(json, { validate: converted.validate });
}

import type { z } from "zod";
import { OpenAiError } from "./errors.ts";

/** `messages[0].content` style path of a zod issue. */
export function issuePath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    out += typeof key === "number" ? `[${key}]` : (out ? "." : "") + String(key);
  }
  return out;
}

/** Parses `value` with `schema`; a mismatch is a 422 naming the first offending field. */
export function parseRequest<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const param = issue.path.length ? issuePath(issue.path) : null;
  throw new OpenAiError(
    "invalid_request_body",
    `${param ? `${param}: ` : ""}${issue.message}`,
    param,
  );
}

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

/**
 * The issue worth reporting. When every branch of a union failed, zod says only "Invalid
 * input"; the branch whose type matched (its first issue is not a wrong type at its root)
 * failed on a limit, and that limit is what the client needs to read.
 */
function explain(issue: z.core.$ZodIssue): { path: PropertyKey[]; message: string } {
  if (issue.code === "invalid_union") {
    const branch = issue.errors.find((issues) =>
      issues.length > 0 && !(issues[0].code === "invalid_type" && issues[0].path.length === 0)
    );
    if (branch) {
      const inner = explain(branch[0]);
      return { path: [...issue.path, ...inner.path], message: inner.message };
    }
  }
  return { path: issue.path, message: issue.message };
}

/** Parses `value` with `schema`; a mismatch is a 400 naming the first offending field. */
export function parseRequest<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const { path, message } = explain(result.error.issues[0]);
  const param = path.length ? issuePath(path) : null;
  throw new OpenAiError("invalid_request_body", `${param ? `${param}: ` : ""}${message}`, param);
}

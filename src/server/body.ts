import type { z } from "zod";
import { decodedBody } from "./content_encoding.ts";
import { ServerError } from "./errors.ts";

/**
 * Reading request bodies defensively: the content type is checked before anything is read,
 * the size is capped while reading (a lying or absent Content-Length cannot get past it),
 * and the checks run in the order clients expect: 415, 413, 400 (malformed JSON), then the
 * shape (422 on the control plane, 400 on /v1).
 */

export function requireJsonContentType(req: Request): void {
  const type = (req.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json") {
    throw new ServerError(
      "unsupported_media_type",
      `expected Content-Type application/json, got ${type ? JSON.stringify(type) : "none"}`,
    );
  }
}

export async function readBody(req: Request, limit: number): Promise<Uint8Array<ArrayBuffer>> {
  const tooLarge = () =>
    new ServerError("payload_too_large", `request body exceeds the limit of ${limit} bytes`);
  const declared = Number(req.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > limit) throw tooLarge();
  if (!req.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = decodedBody(req, req.body).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

export function parseJsonBody(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ServerError(
      "malformed_json",
      `request body is not valid JSON: ${(err as Error).message}`,
    );
  }
}

/** `invalid_request_body` naming the first offending field. */
export function validateBody<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const param = issue.path.length ? issue.path.map(String).join(".") : null;
  throw new ServerError(
    "invalid_request_body",
    `${param ? `${param}: ` : ""}${issue.message}`,
    { param },
  );
}

/** Content type, size limit, JSON, shape: the whole pipeline for a JSON request. */
export async function readJson<T>(
  req: Request,
  limit: number,
  schema: z.ZodType<T>,
): Promise<{ value: T; bytes: Uint8Array<ArrayBuffer> }> {
  requireJsonContentType(req);
  const bytes = await readBody(req, limit);
  return { value: validateBody(schema, parseJsonBody(bytes)), bytes };
}

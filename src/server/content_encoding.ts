import { errorMessage } from "../common/errors.ts";
import { ServerError } from "./errors.ts";

/** What `Content-Encoding` may say of a request body, and how it is undone. */
const FORMATS: Record<string, CompressionFormat> = {
  gzip: "gzip",
  "x-gzip": "gzip",
  deflate: "deflate",
};

/**
 * The request body with its `Content-Encoding` undone, for clients that compress large
 * prompts. The node must read the JSON itself (to route it, and because upstreams such as
 * vLLM cannot read compressed requests), so the body is inflated here, once; the caller's
 * size limit applies to the inflated bytes, so a small bomb cannot grow past it. An encoding
 * that cannot be undone is a 415; a body that is not what its encoding says, a 400.
 */
export function decodedBody(
  req: Request,
  body: ReadableStream<Uint8Array<ArrayBuffer>>,
): ReadableStream<Uint8Array> {
  const codings = (req.headers.get("content-encoding") ?? "").split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");
  if (codings.length === 0) return body;
  const format = codings.length === 1 ? FORMATS[codings[0]] : undefined;
  if (!format) {
    throw new ServerError(
      "unsupported_media_type",
      `Content-Encoding ${codings.join(", ")} is not supported (use gzip or deflate)`,
    );
  }
  const reader = body.pipeThrough<Uint8Array>(new DecompressionStream(format)).getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller): Promise<void> {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (err) {
        controller.error(
          new ServerError(
            "malformed_json",
            `request body is not valid ${codings[0]}: ${errorMessage(err)}`,
          ),
        );
      }
    },
    cancel(reason): Promise<void> {
      return reader.cancel(reason);
    },
  });
}

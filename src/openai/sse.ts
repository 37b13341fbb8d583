/**
 * Server-sent events as OpenAI streams them: `data: <json>\n\n` frames (LF only), a
 * `:\n\n` comment after every second without a frame (so proxies and clients keep a long
 * prefill's connection open), `data: [DONE]\n\n` at the end. The stream is built here
 * rather than with a framework helper so that a client going away is seen at once:
 * cancelling the body calls `onCancel`.
 */

const encoder = new TextEncoder();
const KEEP_ALIVE = encoder.encode(":\n\n");

export const SSE_HEADERS: Record<string, string> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
};

export class SseChannel {
  readonly stream: ReadableStream<Uint8Array>;
  readonly #keepAliveMs: number;
  #controller!: ReadableStreamDefaultController<Uint8Array>;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #open = true;

  constructor(onCancel: () => void, keepAliveMs = 1000) {
    this.#keepAliveMs = keepAliveMs;
    this.stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.#controller = controller;
      },
      cancel: () => {
        this.#stop();
        onCancel();
      },
    });
    this.#arm();
  }

  /** False once the client went away or the stream was closed. */
  get open(): boolean {
    return this.#open;
  }

  /** One `data:` frame. */
  data(value: unknown): void {
    this.#write(`data: ${JSON.stringify(value)}\n\n`);
  }

  /** One named event (the Responses API's `event:` + `data:` frames). */
  event(name: string, value: unknown): void {
    this.#write(`event: ${name}\ndata: ${JSON.stringify(value)}\n\n`);
  }

  /** `data: [DONE]`, then the end of the body. */
  done(): void {
    this.#write("data: [DONE]\n\n");
    this.close();
  }

  close(): void {
    if (!this.#open) return;
    this.#stop();
    try {
      this.#controller.close();
    } catch {
      // already cancelled by the client
    }
  }

  #write(text: string): void {
    if (!this.#open) return;
    this.#controller.enqueue(encoder.encode(text));
    this.#arm();
  }

  #arm(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      if (!this.#open) return;
      this.#controller.enqueue(KEEP_ALIVE);
      this.#arm();
    }, this.#keepAliveMs);
  }

  #stop(): void {
    this.#open = false;
    clearTimeout(this.#timer);
  }
}

export function sseResponse(channel: SseChannel, headers: Record<string, string> = {}): Response {
  return new Response(channel.stream, { status: 200, headers: { ...SSE_HEADERS, ...headers } });
}

/** A failure after the stream started: an OpenAI error object as a frame, then `[DONE]`. */
export function streamError(sse: SseChannel, code: string, message: string): void {
  streamFault(sse, code, message);
  sse.done();
}

/** Why a stream is being cut short, as an OpenAI error frame; its end follows. */
export function streamFault(sse: SseChannel, code: string, message: string): void {
  sse.data({ error: { message, type: "server_error", code, param: null } });
}

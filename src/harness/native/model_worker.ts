/// <reference lib="deno.worker" />
/**
 * The entry point of a model's Worker: the host's messages go to a WorkerLoop
 * (worker_loop.ts), which owns the model's session and steps it.
 *
 * The front end (templates, tokenizing, detokenizing, parsing) runs here, beside the
 * engine core, rather than on the HTTP thread: the HTTP thread serves every model and the
 * gateway's polls, and a slow or runaway template there would stall them all; here it
 * delays one model's steps, and a stuck Worker can be terminated.
 */

import type { HostMessage, WorkerMessage } from "./protocol.ts";
import { WorkerLoop } from "./worker_loop.ts";

const loop = new WorkerLoop((message: WorkerMessage) => self.postMessage(message));

self.onmessage = (e: MessageEvent<HostMessage>): void => loop.onMessage(e.data);

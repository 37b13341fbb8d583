/**
 * Runs recorded tapes on the backend's stream: the arena goes up first, then the step
 * either replays its CUDA graph, is captured into one (second sighting), or is launched
 * kernel by kernel. A capture that fails for any reason marks that tape as never to be
 * captured again and the step runs launch by launch: graphs are an optimisation, never a
 * condition for correct output.
 */

import { errorMessage } from "../../common/errors.ts";
import { log } from "../../common/log.ts";
import type { StepArena } from "./arena.ts";
import type { CudaDriver } from "./driver.ts";
import { CU_STREAM_CAPTURE_MODE_THREAD_LOCAL } from "./driver_symbols.ts";
import type { GraphCache } from "./graph_cache.ts";
import type { KernelSet } from "./kernels.ts";
import { HEADER_WORDS, LAUNCH, Tape } from "./tape.ts";

export interface RunnerStats {
  /** Steps run launch by launch. */
  eagerSteps: number;
  /** Steps replayed from a graph. */
  graphSteps: number;
  captures: number;
  captureFailures: number;
  /** Kernels launched one by one (graph replays not counted). */
  launches: number;
}

export class Runner {
  readonly tape = new Tape();
  readonly stats: RunnerStats = {
    eagerSteps: 0,
    graphSteps: 0,
    captures: 0,
    captureFailures: 0,
    launches: 0,
  };
  readonly #driver: CudaDriver;
  readonly #kernels: KernelSet;
  readonly #arena: StepArena;
  readonly #stream: Deno.PointerValue;
  readonly #graphs: GraphCache | null;
  readonly #out = new BigUint64Array(1);

  constructor(
    driver: CudaDriver,
    kernels: KernelSet,
    arena: StepArena,
    stream: Deno.PointerValue,
    graphs: GraphCache | null,
  ) {
    this.#driver = driver;
    this.#kernels = kernels;
    this.#arena = arena;
    this.#stream = stream;
    this.#graphs = graphs;
  }

  /** Sends the recorded work to the GPU (asynchronously) and starts a new tape. */
  flush(): void {
    const tape = this.tape;
    if (tape.empty) {
      this.#arena.reset();
      return;
    }
    try {
      this.#arena.upload(this.#stream);
      const entry = this.#graphs !== null && tape.launchesOnly
        ? this.#graphs.lookup(tape.words, tape.length)
        : null;
      if (entry !== null && entry.exec === null && !entry.failed && entry.seen >= 2) {
        entry.exec = this.#capture(tape);
        entry.failed = entry.exec === null;
      }
      if (entry !== null && entry.exec !== null) {
        this.#driver.check(
          "cuGraphLaunch",
          this.#driver.sym.cuGraphLaunch(entry.exec, this.#stream),
        );
        this.stats.graphSteps++;
      } else {
        this.#launchAll(tape);
        this.stats.eagerSteps++;
      }
    } finally {
      tape.clear();
      this.#arena.reset();
    }
  }

  /** Flushes and waits for the stream to finish. */
  sync(): void {
    this.flush();
    this.#driver.check("cuStreamSynchronize", this.#driver.sym.cuStreamSynchronize(this.#stream));
  }

  #launchAll(tape: Tape): void {
    const w = tape.words;
    const list = this.#kernels.list;
    const staging = this.#kernels.staging;
    const launch = this.#driver.sym.cuLaunchKernel;
    const stream = this.#stream;
    let r = 0;
    while (r < tape.length) {
      if (w[r] !== LAUNCH) {
        tape.host[w[r + 1]]();
        r += 2;
        continue;
      }
      const k = list[w[r + 1]];
      const n = w[r + 6];
      const p = r + HEADER_WORDS;
      for (let i = 0; i < n; i++) staging[i] = w[p + i];
      const rc = launch(
        k.fn,
        w[r + 2],
        w[r + 3],
        w[r + 4],
        w[r + 5],
        1,
        1,
        0,
        stream,
        k.params,
        null,
      );
      if (rc !== 0) this.#driver.check(`cuLaunchKernel(${k.name})`, rc);
      this.stats.launches++;
      r = p + n;
    }
  }

  /** The tape as an instantiated graph, or null when capture is not possible here. */
  #capture(tape: Tape): Deno.PointerValue {
    const sym = this.#driver.sym;
    let rc = sym.cuStreamBeginCapture_v2(this.#stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (rc !== 0) return this.#captureFailed(`cuStreamBeginCapture: ${this.#driver.describe(rc)}`);
    let launchError: unknown = null;
    try {
      this.#launchAll(tape);
    } catch (err) {
      launchError = err;
    }
    rc = sym.cuStreamEndCapture(this.#stream, this.#out);
    const graph = Deno.UnsafePointer.create(this.#out[0]);
    if (launchError !== null || rc !== 0) {
      // Best effort: the capture already failed, and that is what gets reported.
      if (graph !== null) sym.cuGraphDestroy(graph);
      const why = launchError !== null ? errorMessage(launchError) : this.#driver.describe(rc);
      return this.#captureFailed(why);
    }
    rc = sym.cuGraphInstantiateWithFlags(this.#out, graph, 0n);
    this.#driver.check("cuGraphDestroy", sym.cuGraphDestroy(graph));
    if (rc !== 0) return this.#captureFailed(`cuGraphInstantiate: ${this.#driver.describe(rc)}`);
    this.stats.captures++;
    return Deno.UnsafePointer.create(this.#out[0]);
  }

  #captureFailed(why: string): null {
    this.stats.captureFailures++;
    log.warn("CUDA graph capture failed; this step shape runs without a graph", { reason: why });
    return null;
  }
}

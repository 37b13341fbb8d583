/**
 * CUDA graphs of recorded steps, keyed by the tape's words. A tape seen for the first time
 * runs launch by launch; the second time the same words come, they are captured into a
 * graph, and from then on the step is one cuGraphLaunch. Decode steps of one batch size
 * repeat exactly (positions and block tables live in the arena), so each batch size gets
 * one graph; prefills of ever-new lengths never reach the capture threshold. Least
 * recently used graphs are destroyed past `limit`.
 */

import type { CudaDriver } from "./driver.ts";
import { sameWords, tapeHash } from "./tape.ts";

export interface GraphEntry {
  readonly words: Uint32Array;
  seen: number;
  exec: Deno.PointerValue;
  /** Capture failed once: this tape always runs launch by launch. */
  failed: boolean;
  lastUse: number;
}

export class GraphCache {
  readonly #driver: CudaDriver;
  readonly #limit: number;
  readonly #byHash = new Map<number, GraphEntry[]>();
  #clock = 0;
  #size = 0;

  constructor(driver: CudaDriver, limit = 32) {
    this.#driver = driver;
    this.#limit = limit;
  }

  get size(): number {
    return this.#size;
  }

  /** The entry of these words (made on first sight), its use counted. */
  lookup(words: Uint32Array, length: number): GraphEntry {
    const hash = tapeHash(words, length);
    const list = this.#byHash.get(hash) ?? [];
    let entry = list.find((e) => e.words.length === length && sameWords(e.words, words, length));
    if (entry === undefined) {
      entry = { words: words.slice(0, length), seen: 0, exec: null, failed: false, lastUse: 0 };
      list.push(entry);
      this.#byHash.set(hash, list);
      this.#size++;
      this.#evict(entry);
    }
    entry.seen++;
    entry.lastUse = ++this.#clock;
    return entry;
  }

  #evict(keep: GraphEntry): void {
    while (this.#size > this.#limit) {
      let oldest: { hash: number; entry: GraphEntry } | null = null;
      for (const [hash, list] of this.#byHash) {
        for (const e of list) {
          if (e !== keep && (oldest === null || e.lastUse < oldest.entry.lastUse)) {
            oldest = { hash, entry: e };
          }
        }
      }
      if (oldest === null) return;
      const list = this.#byHash.get(oldest.hash)!.filter((e) => e !== oldest!.entry);
      if (list.length === 0) this.#byHash.delete(oldest.hash);
      else this.#byHash.set(oldest.hash, list);
      this.#destroy(oldest.entry);
      this.#size--;
    }
  }

  #destroy(e: GraphEntry): void {
    const exec = e.exec;
    e.exec = null;
    if (exec !== null) {
      this.#driver.check("cuGraphExecDestroy", this.#driver.sym.cuGraphExecDestroy(exec));
    }
  }

  /** Destroys every graph (their buffers are about to change). */
  clear(): void {
    for (const list of this.#byHash.values()) for (const e of list) this.#destroy(e);
    this.#byHash.clear();
    this.#size = 0;
  }
}

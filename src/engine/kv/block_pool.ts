/**
 * The blocks of the paged KV cache pool: who holds each block, which are free, and which
 * hold a known prefix that a later request may reuse (the prefix cache).
 *
 * A block is free (nobody holds it, no reusable content), held (refcount > 0: by one
 * sequence, or shared by several that start with the same tokens), or cached (refcount 0
 * but its tokens are registered: reusable until evicted, least recently used first).
 * A block is registered whole once full, and may also be registered by its first tokens
 * (a prompt's reuse boundary, scheduler.ts): a request that shares only those copies them
 * into a block of its own, as the owner goes on writing past them.
 * The cache memory itself belongs to the backend; this only hands out indices.
 */

import { NeuronError } from "../../common/errors.ts";

interface CachedBlock {
  block: number;
  tokens: Int32Array;
}

export class BlockPool {
  readonly nBlocks: number;
  readonly blockSize: number;
  readonly #refs: Int32Array;
  readonly #free: number[];
  /** Content key of each block, when its tokens are registered. */
  readonly #keyOf: Array<string | null>;
  readonly #byKey = new Map<string, CachedBlock>();
  /** Blocks registered by their first tokens, by the key of the whole block before them. */
  readonly #partials = new Map<string, CachedBlock[]>();
  readonly #partialParentOf: Array<string | null>;
  #partialCount = 0;
  /** Cached blocks nobody holds, oldest first (Map keeps insertion order). */
  readonly #evictable = new Map<number, true>();
  #lookups = 0;
  #hits = 0;

  constructor(nBlocks: number, blockSize: number) {
    this.nBlocks = nBlocks;
    this.blockSize = blockSize;
    this.#refs = new Int32Array(nBlocks);
    this.#keyOf = new Array(nBlocks).fill(null);
    this.#partialParentOf = new Array(nBlocks).fill(null);
    // Popped from the end: low indices first, so an idle server touches less memory.
    this.#free = Array.from({ length: nBlocks }, (_, i) => nBlocks - 1 - i);
  }

  /** Blocks that can be handed out now (free, or cached and evictable). */
  get available(): number {
    return this.#free.length + this.#evictable.size;
  }

  /** Blocks held by at least one sequence. */
  get held(): number {
    return this.nBlocks - this.available;
  }

  /** Contents registered for reuse, whole blocks and first tokens (held or not). */
  get cached(): number {
    return this.#byKey.size + this.#partialCount;
  }

  /** Prefix-cache lookups and hits so far (in blocks). */
  get prefixStats(): { lookups: number; hits: number } {
    return { lookups: this.#lookups, hits: this.#hits };
  }

  /** Blocks needed for `tokens` positions. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /** A block for the caller to hold (refcount 1), evicting cached content if needed. */
  allocate(): number | null {
    let block = this.#free.pop();
    if (block === undefined) {
      const oldest = this.#evictable.keys().next();
      if (oldest.done) return null;
      block = oldest.value;
      this.#evictable.delete(block);
      this.#forget(block);
    }
    this.#refs[block] = 1;
    return block;
  }

  /** Takes another hold on a block (a sequence reusing a cached prefix). */
  retain(block: number): void {
    this.#check(block);
    if (this.#refs[block] === 0) this.#evictable.delete(block);
    this.#refs[block]++;
  }

  /** Drops one hold; a block nobody holds becomes evictable (if cached) or free. */
  release(block: number): void {
    this.#check(block);
    if (this.#refs[block] <= 0) {
      throw new NeuronError("kv_block_double_free", `block ${block} released more than held`);
    }
    if (--this.#refs[block] > 0) return;
    if (this.#keyOf[block] !== null || this.#partialParentOf[block] !== null) {
      this.#evictable.set(block, true);
    } else {
      this.#free.push(block);
    }
  }

  /**
   * The cached block whose content key is `key` and whose tokens are `tokens` (the key is
   * a hash: the tokens are compared so a collision can never serve wrong K/V).
   */
  lookup(key: string, tokens: ArrayLike<number>): number | null {
    this.#lookups++;
    const hit = this.#byKey.get(key);
    if (hit === undefined || !sameTokens(hit.tokens, tokens)) return null;
    this.#hits++;
    return hit.block;
  }

  /** Makes a full block findable by its content (first writer wins). */
  register(block: number, key: string, tokens: ArrayLike<number>): void {
    this.#check(block);
    if (this.#byKey.has(key) || this.#keyOf[block] !== null) return;
    this.#byKey.set(key, { block, tokens: Int32Array.from(tokens) });
    this.#keyOf[block] = key;
  }

  /** Makes a block findable by its first `tokens`, after the whole block `parent` (the
   * key of the block before it; "" for the first). First writer wins. */
  registerPartial(block: number, parent: string, tokens: ArrayLike<number>): void {
    this.#check(block);
    if (this.#partialParentOf[block] !== null) return;
    const siblings = this.#partials.get(parent) ?? [];
    if (siblings.some((c) => sameTokens(c.tokens, tokens))) return;
    siblings.push({ block, tokens: Int32Array.from(tokens) });
    this.#partials.set(parent, siblings);
    this.#partialParentOf[block] = parent;
    this.#partialCount++;
  }

  /**
   * The block registered after `parent` whose first tokens are the longest run at the start
   * of `next`, at most `most` of them, and how many they are (one lookup in the stats).
   */
  lookupPartial(
    parent: string,
    next: readonly number[],
    most: number,
  ): { block: number; count: number } | null {
    this.#lookups++;
    let best: CachedBlock | null = null;
    for (const c of this.#partials.get(parent) ?? []) {
      const n = c.tokens.length;
      if (n > most || (best !== null && n <= best.tokens.length)) continue;
      if (sameTokens(c.tokens, next.slice(0, n))) best = c;
    }
    if (best === null) return null;
    this.#hits++;
    return { block: best.block, count: best.tokens.length };
  }

  #forget(block: number): void {
    const key = this.#keyOf[block];
    if (key !== null) this.#byKey.delete(key);
    this.#keyOf[block] = null;
    const parent = this.#partialParentOf[block];
    if (parent === null) return;
    const siblings = this.#partials.get(parent)!.filter((c) => c.block !== block);
    if (siblings.length > 0) this.#partials.set(parent, siblings);
    else this.#partials.delete(parent);
    this.#partialParentOf[block] = null;
    this.#partialCount--;
  }

  #check(block: number): void {
    if (!Number.isInteger(block) || block < 0 || block >= this.nBlocks) {
      throw new NeuronError("kv_block_invalid", `block ${block} is not in the pool`);
    }
  }
}

function sameTokens(a: Int32Array, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * The content key of a block: a 64-bit FNV-1a hash chained from the previous block's key,
 * so equal keys mean equal prefixes up to and including this block.
 */
export function blockKey(parent: string, tokens: ArrayLike<number>): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193 ^ parent.length;
  const mix = (x: number): void => {
    h1 = Math.imul(h1 ^ x, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ (x + 0x9e3779b9), 0x85ebca6b) >>> 0;
  };
  for (let i = 0; i < parent.length; i++) mix(parent.charCodeAt(i));
  for (let i = 0; i < tokens.length; i++) mix(tokens[i]);
  return h1.toString(16).padStart(8, "0") + h2.toString(16).padStart(8, "0");
}

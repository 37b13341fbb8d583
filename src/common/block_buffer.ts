/**
 * Buffers a stream of chunks into writes of whole, aligned blocks, so that a file lands in
 * the page cache in huge folios.
 *
 * Linux sizes a page-cache folio by the write that creates it (ext4, xfs and tmpfs keep
 * large folios): a write covering an aligned 2 MiB block makes a 2 MiB folio, and a file
 * mapping then maps it with one huge page instead of 512 small ones. The CPU backend reads
 * weights in place from such a mapping and streams them ~10% faster on huge pages (fewer
 * page walks). Writes of network-sized or odd-sized chunks leave 4 KiB folios behind
 * instead, and every mapping of the file stays on small pages for as long as those pages
 * stay cached.
 */

/** Bytes per write: a multiple of the 2 MiB huge page. */
export const WRITE_BLOCK_BYTES = 8 << 20;

export class BlockBuffer {
  readonly #buf: Uint8Array;
  #used = 0;
  /** Bytes the block being filled holds when full: less for the first one, when the file
   * already ends between two block boundaries. */
  #room: number;

  /** `offset`: the file position the first chunk is written at. */
  constructor(offset = 0, blockBytes = WRITE_BLOCK_BYTES) {
    this.#buf = new Uint8Array(blockBytes);
    this.#room = blockBytes - (offset % blockBytes);
  }

  /**
   * Takes `chunk` and yields every block it completes, in order, each ending at a block
   * boundary. Write each before asking for the next: a yielded block may be the buffer
   * that the next one is collected in.
   */
  *fill(chunk: Uint8Array): Generator<Uint8Array> {
    let off = 0;
    while (off < chunk.byteLength) {
      const need = this.#room - this.#used;
      if (this.#used === 0 && chunk.byteLength - off >= need) {
        // A whole block within the chunk: no copy.
        yield chunk.subarray(off, off + need);
        off += need;
      } else {
        const n = Math.min(need, chunk.byteLength - off);
        this.#buf.set(chunk.subarray(off, off + n), this.#used);
        this.#used += n;
        off += n;
        if (this.#used < this.#room) continue;
        yield this.#buf.subarray(0, this.#used);
      }
      this.#used = 0;
      this.#room = this.#buf.byteLength;
    }
  }

  /** The bytes collected since the last whole block (the file's tail); empties the buffer. */
  rest(): Uint8Array {
    const tail = this.#buf.subarray(0, this.#used);
    this.#room -= this.#used;
    this.#used = 0;
    return tail;
  }
}

/** The integers [from, to), for tests that name runs of positions. */
export function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

/**
 * How a piece of work's time grows with its size, measured so that the machine's speed
 * cancels: the same work at n and at factor x n, alternated, each timed as the fastest of
 * a few runs (a busy moment slows one run, not the fastest of several). Linear work grows
 * by about the factor, quadratic work by its square, whatever the machine, so a test
 * bounds the growth where a bound on the time would depend on how busy the machine is.
 */

/**
 * Time of `work` on `input(factor * n)` over its time on `input(n)`, each the fastest of
 * `runs`. The inputs are made once, before any timing: only the work is measured.
 */
export function growth<T>(
  input: (n: number) => T,
  work: (x: T) => void,
  n: number,
  factor = 4,
  runs = 3,
): number {
  const [small, large] = [input(n), input(factor * n)];
  // The first calls compile what the work runs and grow the heap to the large size's needs.
  work(small);
  work(large);
  let fastSmall = Infinity, fastLarge = Infinity;
  for (let r = 0; r < runs; r++) {
    fastSmall = Math.min(fastSmall, timed(() => work(small)));
    fastLarge = Math.min(fastLarge, timed(() => work(large)));
  }
  return fastLarge / Math.max(fastSmall, 1e-3);
}

function timed(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

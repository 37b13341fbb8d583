/**
 * How a piece of work's time grows with its size, measured so that the machine's speed
 * cancels: the same work at n and at factor x n, alternated, each timed as the fastest of
 * a few runs (a busy moment slows one run, not the fastest of several). Linear work grows
 * by about the factor, quadratic work by its square, whatever the machine, so a test
 * bounds the growth where a bound on the time would depend on how busy the machine is.
 */

/** Time of `work(factor * n)` over time of `work(n)`, each the fastest of `runs`. */
export function growth(work: (n: number) => void, n: number, factor = 4, runs = 3): number {
  // The first calls compile what the work runs and grow the heap to the large size's needs.
  work(n);
  work(factor * n);
  let small = Infinity, large = Infinity;
  for (let r = 0; r < runs; r++) {
    small = Math.min(small, timed(() => work(n)));
    large = Math.min(large, timed(() => work(factor * n)));
  }
  return large / Math.max(small, 1e-3);
}

function timed(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

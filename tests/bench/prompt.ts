/**
 * The prompts the side-by-side benches feed neuron and llama.cpp alike: n ids below `vocab`
 * from a linear congruential sequence, the same for the same seed on both.
 */
export function benchPrompt(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: n }, () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) % vocab);
}

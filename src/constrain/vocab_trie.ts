/**
 * A vocabulary as a byte trie in depth-first order, what a token mask is computed over:
 * tokens that share a prefix share its walk through the automaton, and a prefix the
 * grammar refuses skips its whole subtree (`subtreeEnd`) in one jump. Tokens with no bytes
 * a grammar could match (control tokens, unused rows) stay outside; they are never allowed,
 * but for the end-of-generation tokens when the grammar is complete.
 */

export interface TokenTrie {
  readonly vocabSize: number;
  /** Node 0 is the root (the empty prefix). */
  readonly nodeCount: number;
  readonly label: Uint8Array;
  readonly parent: Int32Array;
  /** The first node after `n`'s subtree. */
  readonly subtreeEnd: Int32Array;
  /** Tokens whose bytes end at node n: `tokens[tokenStart[n] .. tokenStart[n + 1])`. */
  readonly tokenStart: Int32Array;
  readonly tokens: Int32Array;
  /** Each token's bytes (empty outside the trie). */
  readonly pieces: readonly Uint8Array[];
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** `pieces[id]`: the bytes token `id` stands for; empty keeps it out of every grammar. */
export function buildTokenTrie(pieces: readonly Uint8Array[]): TokenTrie {
  const ids: number[] = [];
  for (let id = 0; id < pieces.length; id++) if (pieces[id].length > 0) ids.push(id);
  ids.sort((a, b) => compareBytes(pieces[a], pieces[b]) || a - b);
  return trieOfSorted(pieces, ids);
}

/** The trie of the tokens of `trie` that `keep` keeps (the others stay outside it). */
export function subTrie(trie: TokenTrie, keep: (id: number) => boolean): TokenTrie {
  return trieOfSorted(trie.pieces, Array.from(trie.tokens).filter(keep));
}

/** The trie of `ids`, sorted by their bytes (then id). */
function trieOfSorted(pieces: readonly Uint8Array[], ids: readonly number[]): TokenTrie {
  // At most one node per byte of the tokens, plus the root.
  let most = 1, longest = 0;
  for (const id of ids) {
    most += pieces[id].length;
    longest = Math.max(longest, pieces[id].length);
  }
  const label = new Uint8Array(most);
  const parent = new Int32Array(most);
  const subtreeEnd = new Int32Array(most);
  const nodeOfToken = new Int32Array(ids.length);
  const path = new Int32Array(longest + 1);
  let depth = 0; // path[0..depth]: the nodes from the root to the last token's end
  let nodes = 1;
  parent[0] = -1;
  let prev: Uint8Array = new Uint8Array(0);
  for (let k = 0; k < ids.length; k++) {
    const bytes = pieces[ids[k]];
    let common = 0;
    const n = Math.min(prev.length, bytes.length);
    while (common < n && prev[common] === bytes[common]) common++;
    while (depth > common) subtreeEnd[path[depth--]] = nodes;
    for (let d = common; d < bytes.length; d++) {
      label[nodes] = bytes[d];
      parent[nodes] = path[depth];
      path[++depth] = nodes++;
    }
    nodeOfToken[k] = path[depth];
    prev = bytes;
  }
  while (depth >= 0) subtreeEnd[path[depth--]] = nodes;

  const tokenStart = new Int32Array(nodes + 1);
  for (let k = 0; k < ids.length; k++) tokenStart[nodeOfToken[k] + 1]++;
  for (let n = 0; n < nodes; n++) tokenStart[n + 1] += tokenStart[n];
  // Sorted order is depth-first order: each node's tokens are already consecutive.
  return {
    vocabSize: pieces.length,
    nodeCount: nodes,
    label: label.slice(0, nodes),
    parent: parent.slice(0, nodes),
    subtreeEnd: subtreeEnd.slice(0, nodes),
    tokenStart,
    tokens: Int32Array.from(ids),
    pieces,
  };
}

/** Twenty queries with five documents each (some relevant, most not) for the rerank suites. */

const DOCUMENTS = [
  "Paris is the capital and largest city of France.",
  "Berlin has been Germany's capital since reunification in 1990.",
  "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
  "The mitochondrion is the powerhouse of the cell.",
  "Rust guarantees memory safety without a garbage collector.",
  "Python's list comprehensions build lists from iterables.",
  "The Pacific is the largest and deepest ocean on Earth.",
  "Mount Everest rises 8,849 metres above sea level.",
  "Bananas are rich in potassium.",
  "A sonnet has fourteen lines.",
  "The speed of light in vacuum is 299,792,458 metres per second.",
  "Water boils at 100 °C at sea level.",
  "Tokyo is the most populous metropolitan area in the world.",
  "The Great Wall of China is visible from low orbit only in good conditions.",
  "Jupiter is the largest planet in the solar system.",
  "Shakespeare wrote Hamlet around 1600.",
  "TCP retransmits segments that are not acknowledged.",
  "Insulin regulates the level of glucose in the blood.",
  "El Niño warms the surface of the eastern Pacific.",
  "Chess engines search game trees with alpha-beta pruning.",
];

const QUERIES = [
  "What is the capital of France?",
  "Which city is Germany's capital?",
  "How do plants make food?",
  "What produces energy in cells?",
  "Which language is memory safe without GC?",
  "How do I build a list in Python?",
  "What is the biggest ocean?",
  "How tall is Everest?",
  "Which fruit has potassium?",
  "How many lines in a sonnet?",
  "How fast does light travel?",
  "At what temperature does water boil?",
  "Largest city by population",
  "Can you see the Great Wall from space?",
  "Biggest planet",
  "When was Hamlet written?",
  "What happens to lost TCP packets?",
  "What does insulin do?",
  "What is El Niño?",
  "How do chess programs think?",
];

export interface RerankSet {
  query: string;
  documents: string[];
}

/** Query i with document i and four others, in a fixed order that differs per query. */
export const RERANK_SETS: RerankSet[] = QUERIES.map((query, i) => ({
  query,
  documents: [7, 3, 0, 11, 5].map((k) => DOCUMENTS[(i + k * (i % 3 + 1)) % DOCUMENTS.length]),
}));

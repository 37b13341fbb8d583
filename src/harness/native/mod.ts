/** The native harness: GGUF models in the in-process engine, served over the OpenAI routes. */
export { NativeHarness } from "./native_harness.ts";
export { Admission, AdmissionError, type AdmissionLimits } from "./admission.ts";

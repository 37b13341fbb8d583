/** The HTTP node: control plane, OpenAI routes, metrics, lifecycle. */
export { type NeuronNode, startNode } from "./node.ts";
export { createApp } from "./app.ts";

/**
 * Chat templates against llama-server's renders: every chat prompt of the four model
 * goldens (messages, tools, chat_template_kwargs) renders byte for byte as the golden
 * `text`, from the template stored in that model's GGUF, and tokenizes to the golden tokens.
 */
import { assertEquals } from "../support/assert.ts";
import { fixture, MODEL_FIXTURES, modelGolden } from "../fixtures.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { chatTemplateFromGguf, parseMessages, parseTools } from "../../src/chat/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";

for (const model of MODEL_FIXTURES) {
  Deno.test(`${model}: chat prompts render as llama-server's and tokenize to the goldens`, () => {
    const file = openGguf(fixture(`${model}.gguf`));
    try {
      const template = chatTemplateFromGguf(file);
      const tokenizer = loadTokenizer(file);
      let rendered = 0;
      for (const prompt of modelGolden(model).prompts) {
        if (prompt.messages === undefined) continue;
        const text = template.render(parseMessages(prompt.messages), {
          tools: prompt.tools === undefined ? undefined : parseTools(prompt.tools),
          kwargs: prompt.chat_template_kwargs,
          addGenerationPrompt: true,
        });
        assertEquals(text, prompt.text, `${model} ${prompt.name}`);
        assertEquals(
          tokenizer.encode(text, { parseSpecial: true, addSpecial: true }),
          prompt.tokens,
          `${model} ${prompt.name} tokens`,
        );
        rendered++;
      }
      assertEquals(rendered, 8);
    } finally {
      file.close();
    }
  });
}

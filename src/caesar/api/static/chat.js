// The chat page's one script (api/dashboard_chat.py): Enter sends, the reply streams in, and
// once the turn is recorded the server's "remembered for this reply" panel is put beside it.
// Text from the operator or the model goes in as text only (textContent, text nodes), never
// as HTML; the panel is HTML the server rendered with Jinja, escaped like every page. Without
// this script the form still works: the server answers, then reloads the conversation.
"use strict";

(() => {
  const form = document.querySelector("form.composer");
  const log = document.querySelector("ol.chat-log");
  if (!form || !log) return;
  const box = form.querySelector("textarea[name=message]");
  const button = form.querySelector("button[type=submit]");
  const status = form.querySelector(".chat-status");
  let busy = false;

  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  function message(role, who, text) {
    const item = document.createElement("li");
    item.className = `msg msg-${role}`;
    const said = document.createElement("div");
    said.className = "said";
    const name = document.createElement("b");
    name.className = "who";
    name.textContent = who;
    const body = document.createElement("p");
    body.className = "text";
    body.textContent = text;
    said.append(name, body);
    item.append(said);
    log.append(item);
    return item;
  }

  function note(item, text, alert) {
    const line = document.createElement("p");
    line.className = alert ? "error" : "hint";
    if (alert) line.setAttribute("role", "alert");
    line.textContent = text;
    item.append(line);
  }

  // The message of the HTML page a refused request answers with (401, 403, 404, 422, …).
  async function refusal(response) {
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const said = page.querySelector(".error");
    return said ? said.textContent : `The server answered ${response.status}.`;
  }

  // The server's events, `data: {json}` blocks, as they arrive.
  async function* events(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        if (block.startsWith("data: ")) yield JSON.parse(block.slice(6));
      }
    }
  }

  // A new conversation has its id once its first turn is recorded (or failed): the form
  // continues it, the address and the heading name it, the list shows it.
  function continuing(done, opening) {
    if (!done.conversation_id || form.querySelector("input[name=conversation_id]")) return;
    const field = document.createElement("input");
    field.type = "hidden";
    field.name = "conversation_id";
    field.value = String(done.conversation_id);
    form.append(field);
    history.replaceState(null, "", done.url);
    const heading = document.getElementById("chat-title");
    if (heading) heading.textContent = `Conversation #${done.conversation_id}`;
    document.title = `Chat #${done.conversation_id} · caesar`;
    const fresh = document.querySelector("a.new-chat");
    if (fresh) fresh.removeAttribute("aria-current");
    const list = document.querySelector("nav.conversations ol");
    if (list) {
      const entry = document.createElement("li");
      entry.className = "listed current";
      const link = document.createElement("a");
      link.href = done.url;
      link.textContent = opening.slice(0, 120);
      link.setAttribute("aria-current", "page");
      const meta = document.createElement("span");
      meta.className = "meta";
      meta.textContent = "just now";
      entry.append(link, meta);
      list.prepend(entry);
      document.querySelector("nav.conversations .none-yet")?.remove();
    }
  }

  async function panel(item, url) {
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) throw new Error(await refusal(response));
    const fragment = new DOMParser().parseFromString(await response.text(), "text/html");
    const found = fragment.querySelector("details.remembered");
    if (!found) return;
    for (const open of log.querySelectorAll("details.remembered[open]")) open.open = false;
    item.append(document.adoptNode(found));
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = box.value;
    if (busy || !text.trim()) return;
    busy = true;
    button.disabled = true;
    const sent = new URLSearchParams(new FormData(form));
    box.value = "";
    message("user", "operator", text);
    const reply = message("assistant", "caesar", "");
    const words = reply.querySelector("p.text").appendChild(document.createTextNode(""));
    reply.setAttribute("aria-busy", "true");
    reply.scrollIntoView({ block: "end" });
    status.textContent = "caesar is answering…";
    let done = null;
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body: sent,
        headers: { Accept: "text/event-stream" },
        credentials: "same-origin",
      });
      if (!response.ok) throw new Error(await refusal(response));
      for await (const data of events(response)) {
        if (data.type === "text") {
          words.appendData(data.text);
        } else if (data.type === "error") {
          continuing(data, text);
          throw new Error(data.message);
        } else if (data.type === "done") {
          done = data;
        }
      }
      if (!done) throw new Error("The reply broke off; reload the page to see what was kept.");
      if (done.finish_reason === "length") note(reply, "(cut off at the reply limit)", false);
      continuing(done, text);
      status.textContent = "Answered.";
      await panel(reply, done.memory_url);
    } catch (error) {
      const said = error instanceof Error ? error.message : String(error);
      if (done) {
        note(reply, `What was remembered for this reply did not load: ${said}`, true);
      } else {
        note(reply, said, true);
        status.textContent = "Not answered.";
        if (!box.value) box.value = text; // to send again
      }
    } finally {
      reply.removeAttribute("aria-busy");
      busy = false;
      button.disabled = false;
      box.focus();
    }
  });
})();

"""The readers of other assistants' exports (caesar.import_formats), on files built here in the
exports' own shapes (the field names the formats' sources and other projects' parsers show:
docs/import.md). Pure: no database."""

from __future__ import annotations

import hashlib
import json
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from caesar.import_formats import FORMATS, Broken, FileBroken, Source, detect, read
from caesar.import_formats import SourceMessage as Msg

T0 = 1717236000.0  # 2024-06-01 10:00:00 UTC
AT0 = datetime(2024, 6, 1, 10, 0, 0)
KNOWN = "(caesar imports: chatgpt, claude, openwebui, caesar)"


def at(seconds: float) -> datetime:
    return AT0 + timedelta(seconds=seconds)


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def write_zip(path: Path, members: dict[str, Any]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data if isinstance(data, str) else json.dumps(data))
    return path


def turns(source: Source | Broken) -> list[tuple[str, str]]:
    assert isinstance(source, Source), source
    return [(m.role, m.content) for m in source.messages]


def only(results: Any) -> Source:
    results = list(results)
    assert len(results) == 1 and isinstance(results[0], Source), results
    return results[0]


def broken(results: list[Source | Broken]) -> list[tuple[str, str]]:
    return [(r.key, r.reason) for r in results if isinstance(r, Broken)]


# -- ChatGPT --------------------------------------------------------------------------------


def gm(
    role: str,
    *parts: Any,
    t: float | None = None,
    kind: str = "text",
    to: str = "all",
    meta: dict[str, Any] | None = None,
    content: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A message of conversations.json's `mapping`."""
    return {
        "id": f"m-{role}-{t}",
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": None if t is None else T0 + t,
        "content": content or {"content_type": kind, "parts": list(parts)},
        "status": "finished_successfully",
        "weight": 1.0,
        "metadata": meta or {},
        "recipient": to,
    }


def tree(*nodes: tuple[str, str | None, dict[str, Any] | None]) -> dict[str, Any]:
    """`mapping` from (node id, parent id, message), children filled in."""
    mapping: dict[str, Any] = {
        n: {"id": n, "message": m, "parent": p, "children": []} for n, p, m in nodes
    }
    for node_id, parent, _ in nodes:
        if parent in mapping:
            mapping[parent]["children"].append(node_id)
    return mapping


def chain(*messages: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A mapping of one branch under an empty root, and its last node."""
    nodes: list[tuple[str, str | None, dict[str, Any] | None]] = [("root", None, None)]
    for n, message in enumerate(messages):
        nodes.append((f"n{n}", nodes[-1][0], message))
    return tree(*nodes), nodes[-1][0]


def gpt(
    cid: str | None,
    mapping: dict[str, Any],
    current: str | None,
    *,
    t: float | None = 0.0,
    title: str = "Chat",
) -> dict[str, Any]:
    return {
        "title": title,
        "create_time": None if t is None else T0 + t,
        "update_time": T0 + 9000,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": current,
        "id": cid,
        "conversation_id": cid,
    }


def simple_gpt(cid: str, said: str, reply: str, t: float = 0.0) -> dict[str, Any]:
    return gpt(cid, *chain(gm("user", said, t=t + 1), gm("assistant", reply, t=t + 2)), t=t)


def custom_instructions(about_user: str, about_model: str) -> dict[str, Any]:
    """As a 2025 export holds them: a hidden user message of `user_editable_context`, its
    content wrapped in ChatGPT's words, the person's own words in its metadata."""
    profile = (
        "The user provided the following information about themselves. This user profile"
        " is shown to you in all conversations they have.\nUser profile:\n```"
    )
    respond = "The user provided the additional info about how they would like you to respond:\n```"
    content = {
        "content_type": "user_editable_context",
        "user_profile": profile + about_user + "```",
        "user_instructions": respond + about_model + "```",
    }
    meta = {
        "is_visually_hidden_from_conversation": True,
        "is_user_system_message": True,
        "user_context_message_data": {
            "about_user_message": about_user,
            "about_model_message": about_model,
        },
    }
    return gm("user", content=content, meta=meta)


def test_chatgpt_reads_only_the_branch_ending_at_current_node(tmp_path: Path) -> None:
    hidden = {"is_visually_hidden_from_conversation": True}
    mapping = tree(
        ("root", None, None),
        ("sys", "root", gm("system", "", meta=hidden)),
        ("u1", "sys", gm("user", "Plan a weekend in Kyoto.", t=10)),
        ("a1", "u1", gm("assistant", "Day one: Fushimi Inari.", t=20)),
        # The first follow-up and its reply, edited away: not imported.
        ("u-old", "a1", gm("user", "OLD QUESTION about Osaka?", t=30)),
        ("a-old", "u-old", gm("assistant", "OLD REPLY about Osaka.", t=40)),
        ("u2", "a1", gm("user", "What about Nara?", t=50)),
        ("a2-old", "u2", gm("assistant", "OLD REGENERATED reply.", t=60)),
        ("a2", "u2", gm("assistant", "Nara has the deer park.", t=70)),
    )
    path = write_json(tmp_path / "conversations.json", [gpt("c-1", mapping, "a2")])

    source = only(read(path, "chatgpt"))

    assert (source.key, source.title, source.created_at) == ("chatgpt:c-1", "Chat", AT0)
    assert source.messages == [
        Msg("user", "Plan a weekend in Kyoto.", at(10)),
        Msg("assistant", "Day one: Fushimi Inari.", at(20)),
        Msg("user", "What about Nara?", at(50)),
        Msg("assistant", "Nara has the deer park.", at(70)),
    ]


def test_chatgpt_skips_hidden_system_tool_and_code_interpreter_messages(tmp_path: Path) -> None:
    def typed(kind: str, **fields: Any) -> dict[str, Any]:
        return {"content_type": kind, **fields}

    mapping, last = chain(
        gm("system", "You are ChatGPT.", t=0),
        gm("user", "hidden context", t=1, meta={"is_visually_hidden_from_conversation": True}),
        gm("user", "Plot sin(x) for me.", t=2),
        gm(
            "assistant", t=3, content=typed("thoughts", thoughts=[{"summary": "s", "content": "c"}])
        ),
        gm("assistant", t=4, to="python", content=typed("code", language="python", text="plot()")),
        gm("tool", t=5, content=typed("execution_output", text="<Figure>")),
        gm("assistant", "search('sin')", t=6, to="web.run"),
        gm("tool", t=7, content=typed("tether_browsing_display", result="page")),
        gm("assistant", t=8, content=typed("reasoning_recap", content="Thought for 3s")),
        gm("assistant", "Here is the plot of sin(x).", t=9),
    )
    path = write_json(tmp_path / "c.json", [gpt("c-tools", mapping, last)])

    assert turns(only(read(path, "chatgpt"))) == [
        ("user", "Plot sin(x) for me."),
        ("assistant", "Here is the plot of sin(x)."),
    ]


def test_chatgpt_images_audio_and_files_become_placeholders(tmp_path: Path) -> None:
    image = {"content_type": "image_asset_pointer", "asset_pointer": "sediment://f1", "width": 9}
    audio = {"content_type": "audio_asset_pointer", "asset_pointer": "sediment://f2"}
    video = {"content_type": "real_time_user_audio_video_asset_pointer", "audio_asset_pointer": {}}
    heard = {"content_type": "audio_transcription", "text": "Remind me to call Mum."}
    spoke = {"content_type": "audio_transcription", "text": "I will.", "direction": "out"}
    pdf = {"id": "file-9", "name": "lease.pdf", "mime_type": "application/pdf"}
    png = {"id": "file-8", "name": "x.png", "mime_type": "image/png"}
    mm = "multimodal_text"
    mapping, last = chain(
        gm("user", image, "What bird is this?", t=1, kind=mm),
        gm("assistant", "A robin.", t=2),
        gm("user", video, heard, t=3, kind=mm),
        gm("assistant", spoke, audio, t=4, kind=mm),
        gm("user", audio, {"content_type": "something_new"}, 42, None, t=5, kind=mm),
        gm("assistant", "Got it.", t=6),
        gm("user", "Summarise the lease.", t=7, meta={"attachments": [pdf, png]}),
        gm("assistant", "It runs two years.", t=8),
    )
    path = write_json(tmp_path / "c.json", [gpt("c-media", mapping, last)])

    assert turns(only(read(path, "chatgpt"))) == [
        ("user", "[image]\nWhat bird is this?"),
        ("assistant", "A robin."),
        ("user", "Remind me to call Mum."),
        ("assistant", "I will."),
        ("user", "[audio]\n[file]"),
        ("assistant", "Got it."),
        ("user", "[file: lease.pdf]\nSummarise the lease."),
        ("assistant", "It runs two years."),
    ]


def test_chatgpt_keeps_unicode_and_merges_turns_of_one_role(tmp_path: Path) -> None:
    mapping, last = chain(
        gm("user", "🎉 東京へ行きます", t=1),
        gm("user", "שלום, מה שלומך؟ مرحبا", t=2),
        gm("assistant", "Великолепно! 👍", t=3),
        gm("assistant", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ok", t=4),
    )
    path = write_json(tmp_path / "c.json", [gpt("c-uni", mapping, last, title="日本 🗾")])

    source = only(read(path, "chatgpt"))

    assert source.title == "日本 🗾"
    assert source.messages == [
        Msg("user", "🎉 東京へ行きます\n\nשלום, מה שלומך؟ مرحبا", at(1)),
        Msg("assistant", "Великолепно! 👍\n\n𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ok", at(3)),
    ]


def test_chatgpt_empty_conversations_are_sources_without_messages(tmp_path: Path) -> None:
    system_only = gpt("c-a", *chain(gm("system", "x", t=1)), t=5)
    path = write_json(tmp_path / "c.json", [system_only, gpt("c-b", {}, None, t=6)])

    assert list(read(path, "chatgpt")) == [
        Source("chatgpt:c-a", "Chat", at(5), []),
        Source("chatgpt:c-b", "Chat", at(6), []),
    ]


def test_chatgpt_dates_fall_back_to_the_first_message_then_update_time(tmp_path: Path) -> None:
    first_said = {**simple_gpt("c-first", "hi", "hello", t=100), "create_time": None}
    updated = gpt("c-update", tree(("root", None, None)), "root", t=None)
    undated = {**gpt("c-none", *chain(gm("user", "hey")), t=None), "update_time": None}
    path = write_json(tmp_path / "c.json", [first_said, updated, undated])

    first, second, third = read(path, "chatgpt")

    assert isinstance(first, Source) and first.created_at == at(101)
    assert [m.at for m in first.messages] == [at(101), at(102)]
    assert isinstance(second, Source) and second.created_at == at(9000)
    assert third == Broken(
        "chatgpt:c-none", "has no date: no create_time, update_time or dated message"
    )


def test_chatgpt_a_broken_conversation_is_named_and_the_rest_are_read(tmp_path: Path) -> None:
    loop = tree(("x", "y", gm("user", "a", t=1)), ("y", "x", gm("assistant", "b", t=2)))
    dangling = tree(("u", "gone", gm("user", "a", t=1)))
    conversations = [
        simple_gpt("good-1", "first", "one"),
        gpt("missing-current", tree(("root", None, None)), "nowhere"),
        gpt("loop", loop, "x"),
        gpt("dangling", dangling, "u"),
        {**simple_gpt("bad-mapping", "a", "b"), "mapping": ["not", "a", "dict"]},
        {**simple_gpt("bad-date", "a", "b"), "create_time": "yesterday"},
        {**simple_gpt("no-id", "a", "b"), "id": None, "conversation_id": None},
        "not a conversation",
        simple_gpt("good-2", "second", "two"),
    ]
    path = write_json(tmp_path / "c.json", conversations)

    results = list(read(path, "chatgpt"))

    assert [r.key for r in results if isinstance(r, Source)] == ["chatgpt:good-1", "chatgpt:good-2"]
    assert broken(results) == [
        ("chatgpt:missing-current", "current_node 'nowhere' is not in 'mapping'"),
        ("chatgpt:loop", "the parents of node 'x' loop back to 'x'"),
        ("chatgpt:dangling", "node 'u' names parent 'gone', which is not in 'mapping'"),
        ("chatgpt:bad-mapping", "'mapping' is a JSON array, not a JSON object"),
        ("chatgpt:bad-date", "create_time 'yesterday' is not a time in seconds"),
        ("#7", "conversation #7 has no 'id' or 'conversation_id'"),
        ("#8", "conversation #8 is a JSON string, not a JSON object"),
    ]


def test_chatgpt_custom_instructions_are_one_source_per_distinct_text(tmp_path: Path) -> None:
    about, how = "Preferred name: Ada\nRole: structural engineer\n", "Be concise. Metric units."
    conversations = []
    for n, t in enumerate([3000.0, 1000.0, 2000.0]):  # the earliest is the second
        mapping, last = chain(
            custom_instructions(about, how),
            gm("user", f"question {n}", t=t + 1),
            gm("assistant", f"answer {n}", t=t + 2),
        )
        conversations.append(gpt(f"c-{n}", mapping, last, t=t))
    # Changed later: another text, a Source of its own.
    changed, last = chain(
        custom_instructions("Preferred name: Ada", ""), gm("user", "later", t=5001)
    )
    conversations.append(gpt("c-later", changed, last, t=5000))
    path = write_zip(
        tmp_path / "export.zip", {"conversations.json": conversations, "user.json": {}}
    )

    results = list(read(path, "chatgpt"))

    assert [turns(r) for r in results[:3]] == [
        [("user", f"question {n}"), ("assistant", f"answer {n}")] for n in range(3)
    ]
    first = "Preferred name: Ada\nRole: structural engineer\n\nBe concise. Metric units."
    second = "Preferred name: Ada"
    assert results[4:] == [
        Source(
            "chatgpt:custom-instructions:" + hashlib.sha256(text.encode()).hexdigest()[:16],
            "ChatGPT custom instructions",
            when,
            [Msg("user", text, when)],
        )
        for text, when in [(first, at(1000)), (second, at(5000))]
    ]


def test_chatgpt_custom_instructions_without_metadata_lose_chatgpts_wrapper(
    tmp_path: Path,
) -> None:
    node = custom_instructions("Lives in Lyon.", "")
    node["metadata"] = {"is_visually_hidden_from_conversation": True}
    node["content"]["user_instructions"] = (
        "The user provided the additional info about how they would like you to respond:\n```"
        "Follow the instructions below naturally, without repeating, referencing, echoing, or "
        "mirroring any of their wording!\n\nAnswer in French.```"
    )
    path = write_json(tmp_path / "c.json", [gpt("c-1", *chain(node, gm("user", "Salut", t=1)))])

    *_, instructions = read(path, "chatgpt")

    assert turns(instructions) == [("user", "Lives in Lyon.\n\nAnswer in French.")]


def test_chatgpt_split_export_and_a_wrapped_array_are_read(tmp_path: Path) -> None:
    path = write_zip(
        tmp_path / "split.zip",
        {
            "conversations-000.json": [simple_gpt("c-0", "zero", "0")],
            "conversations-001.json": {"conversations": [simple_gpt("c-1", "one", "1")]},
            "chat.html": "<html></html>",
        },
    )

    assert detect(path) == "chatgpt"
    assert [r.key for r in read(path, "chatgpt")] == ["chatgpt:c-0", "chatgpt:c-1"]


# -- Claude ---------------------------------------------------------------------------------

ROOT = "00000000-0000-4000-8000-000000000000"  # a first message's parent, when linked


def cm(
    uuid: str, sender: str, text: str, minute: int, parent: str | None = None, **fields: Any
) -> dict[str, Any]:
    """A message of a Claude conversation's `chat_messages`."""
    stamp = f"2024-06-01T10:{minute:02d}:00.000000Z"
    block: dict[str, Any] = {
        "start_timestamp": stamp,
        "stop_timestamp": stamp,
        "flags": None,
        "type": "text",
        "text": text,
        "citations": [],
    }
    message = {
        "uuid": uuid,
        "text": text,
        "content": [block],
        "sender": sender,
        "created_at": stamp,
        "updated_at": stamp,
        "attachments": [],
        "files": [],
    }
    if parent is not None:
        message["parent_message_uuid"] = parent
    return {**message, **fields}


def claude(
    uuid: str, messages: list[Any], name: str = "Trip", created: str | None = "2024-06-01T10:00:00Z"
) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "name": name,
        "summary": "",
        "created_at": created,
        "updated_at": "2024-06-01T12:00:00.000000Z",
        "account": {"uuid": "acct-1"},
        "chat_messages": messages,
    }


def test_claude_reads_the_branch_ending_at_the_last_message(tmp_path: Path) -> None:
    messages = [
        cm("h1", "human", "Plan a weekend in Kyoto.", 1, ROOT),
        cm("a1", "assistant", "Day one: Fushimi Inari.", 2, "h1"),
        cm("h-old", "human", "OLD QUESTION about Osaka?", 3, "a1"),
        cm("a-old", "assistant", "OLD REPLY about Osaka.", 4, "h-old"),
        cm("h2", "human", "What about Nara?", 5, "a1"),
        cm("a2", "assistant", "Nara has the deer park.", 6, "h2"),
    ]
    members = {"conversations.json": [claude("conv-1", messages)], "users.json": []}
    path = write_zip(tmp_path / "claude.zip", members)

    source = only(read(path, "claude"))

    assert (source.key, source.title, source.created_at) == ("claude:conv-1", "Trip", AT0)
    assert source.messages == [
        Msg("user", "Plan a weekend in Kyoto.", at(60)),
        Msg("assistant", "Day one: Fushimi Inari.", at(120)),
        Msg("user", "What about Nara?", at(300)),
        Msg("assistant", "Nara has the deer park.", at(360)),
    ]


def test_claude_without_links_keeps_the_last_version_of_an_edited_message(tmp_path: Path) -> None:
    messages = [
        cm("h1", "human", "Plan a weekend in Kyoto.", 1),
        cm("a1", "assistant", "Day one: Fushimi Inari.", 2),
        cm("h-old", "human", "OLD QUESTION about Osaka?", 3),
        cm("h2", "human", "What about Nara?", 5),
        cm("a2", "assistant", "Nara has the deer park.", 6),
    ]
    path = write_json(tmp_path / "conversations.json", [claude("conv-1", messages)])

    assert turns(only(read(path, "claude"))) == [
        ("user", "Plan a weekend in Kyoto."),
        ("assistant", "Day one: Fushimi Inari."),
        ("user", "What about Nara?"),
        ("assistant", "Nara has the deer park."),
    ]


def test_claude_skips_thinking_and_tools_and_names_attachments(tmp_path: Path) -> None:
    answer = [
        {"type": "thinking", "thinking": "The user wants the weather.", "summaries": []},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "name": "web_search", "input": {"query": "Lyon weather"}},
        {"type": "tool_result", "name": "web_search", "content": [{"type": "text", "text": "R"}]},
        {"type": "token_budget"},
        {"type": "text", "text": "Lyon is ", "citations": []},
        {"type": "text", "text": "20 °C", "citations": [{"url": "https://example.org"}]},
        {"type": "text", "text": " today."},
    ]
    notes = {"file_name": "notes.txt", "file_type": "txt", "extracted_content": "SECRET TEXT"}
    messages = [
        cm(
            "h1",
            "human",
            "Summarise these.",
            1,
            attachments=[notes],
            files=[{"file_uuid": "f-1", "file_name": "photo.png"}, {"file_name": "notes.txt"}],
        ),
        cm("a1", "assistant", "IGNORED: the blocks are the message", 2, content=answer),
        cm("h2", "human", "Thanks!", 3, content=[]),  # no blocks: `text` is the message
        cm("s1", "system", "a system note", 4),
    ]
    path = write_json(tmp_path / "conversations.json", [claude("conv-2", messages)])

    assert turns(only(read(path, "claude"))) == [
        ("user", "[file: notes.txt]\n[file: photo.png]\nSummarise these."),
        ("assistant", "Let me check.\n\nLyon is 20 °C today."),
        ("user", "Thanks!"),
    ]


def test_claude_unicode_empty_conversations_and_dates(tmp_path: Path) -> None:
    said = "東京の天気は？ 🌧️ שלום"
    uni = claude("uni", [cm("h", "human", said, 7), cm("a", "assistant", "雨です ☔", 8)], "天気")
    undated = claude("undated", [cm("h", "human", "hi", 9)], created=None)
    path = write_json(tmp_path / "conversations.json", [uni, claude("empty", [], ""), undated])

    first, empty, last = read(path, "claude")

    assert isinstance(first, Source) and first.title == "天気"
    assert first.messages == [Msg("user", said, at(420)), Msg("assistant", "雨です ☔", at(480))]
    assert empty == Source("claude:empty", None, AT0, [])
    assert isinstance(last, Source) and last.created_at == at(540)


def test_claude_a_broken_conversation_is_named_and_the_rest_are_read(tmp_path: Path) -> None:
    loop = [cm("a", "human", "x", 1, "b"), cm("b", "assistant", "y", 2, "a")]
    conversations = [
        claude("good", [cm("h", "human", "hi", 1)]),
        claude("bad-date", [], created="last Tuesday"),
        {**claude("bad-messages", []), "chat_messages": {"h": "hi"}},
        claude("bad-parent", [cm("h", "human", "hi", 1, "gone")]),
        claude("loop", loop),
        claude("", []),
        claude("good-2", [cm("h", "human", "bye", 1)]),
    ]
    path = write_json(tmp_path / "conversations.json", conversations)

    results = list(read(path, "claude"))

    assert [r.key for r in results if isinstance(r, Source)] == ["claude:good", "claude:good-2"]
    assert broken(results) == [
        ("claude:bad-date", "created_at 'last Tuesday' is not an ISO-8601 time"),
        ("claude:bad-messages", "'chat_messages' is a JSON object with keys 'h', not a JSON array"),
        ("claude:bad-parent", "message #1 names parent 'gone', which is not among the messages"),
        ("claude:loop", "the parents of message #1 loop back to 'b'"),
        ("#6", "conversation #6 has no 'uuid'"),
    ]


# -- Open WebUI -----------------------------------------------------------------------------


def om(
    mid: str,
    role: str,
    content: str,
    t: float,
    parent: str | None,
    children: list[str],
    **fields: Any,
) -> dict[str, Any]:
    """A message of an Open WebUI chat's `history.messages`."""
    return {
        "id": mid,
        "parentId": parent,
        "childrenIds": children,
        "role": role,
        "content": content,
        "timestamp": int(T0 + t),
        "models": ["llama3"],
        **fields,
    }


def owui(
    cid: str,
    messages: dict[str, Any] | None,
    current: str | None = None,
    listed: list[Any] | None = None,
    created: float = T0,
) -> dict[str, Any]:
    """One item of Settings → Data Controls → Export Chats (GET /api/v1/chats/all)."""
    chat: dict[str, Any] = {
        "id": "",
        "title": "Kyoto",
        "models": ["llama3"],
        "params": {},
        "messages": listed or [],
        "tags": [],
        "timestamp": int(T0 * 1000),
    }
    if messages is not None:
        chat["history"] = {"messages": messages, "currentId": current}
    return {
        "id": cid,
        "user_id": "u-1",
        "title": "Kyoto",
        "chat": chat,
        "created_at": created,
        "updated_at": int(T0 + 9000),
        "share_id": None,
        "archived": False,
        "meta": {},
    }


def test_openwebui_reads_the_branch_ending_at_current_id(tmp_path: Path) -> None:
    messages = {
        "u1": om("u1", "user", "Plan a weekend in Kyoto.", 10, None, ["a1"]),
        "a1": om("a1", "assistant", "Day one: Fushimi Inari.", 20, "u1", ["u-old", "u2"]),
        "u-old": om("u-old", "user", "OLD QUESTION about Osaka?", 30, "a1", ["a-old"]),
        "a-old": om("a-old", "assistant", "OLD REPLY about Osaka.", 40, "u-old", []),
        "u2": om("u2", "user", "What about Nara?", 50, "a1", ["a2-other", "a2"]),
        "a2-other": om("a2-other", "assistant", "OTHER MODEL's reply.", 60, "u2", []),
        "a2": om("a2", "assistant", "Nara has the deer park.", 70, "u2", []),
    }
    # One chat's "Export chat (.json)" is an array of one.
    path = write_json(tmp_path / "chat-export-1.json", [owui("chat-1", messages, "a2")])

    source = only(read(path, "openwebui"))

    assert (source.key, source.title, source.created_at) == ("openwebui:chat-1", "Kyoto", AT0)
    assert source.messages == [
        Msg("user", "Plan a weekend in Kyoto.", at(10)),
        Msg("assistant", "Day one: Fushimi Inari.", at(20)),
        Msg("user", "What about Nara?", at(50)),
        Msg("assistant", "Nara has the deer park.", at(70)),
    ]


def test_openwebui_strips_reasoning_and_tool_blocks_and_names_files(tmp_path: Path) -> None:
    reply = (
        '<details type="reasoning" done="true" duration="5">\n<summary>Thought for 5 seconds'
        "</summary>\n> THINKING ABOUT IT\n</details>\n"
        '<details type="tool_calls" done="true" id="c1" name="search" result="RESULT">\n'
        "<summary>Tool Executed</summary>\n</details>\n"
        "It is a robin 🐦."
    )
    files = [
        {"type": "image", "url": "data:image/png;base64,AAAA"},
        {"type": "file", "name": "field-notes.pdf", "id": "f1"},
    ]
    messages = {
        "s": om("s", "system", "You are helpful.", 0, None, ["u"]),
        "u": om("u", "user", "Which bird? مرحبا", 1, "s", ["a"], files=files),
        "a": om("a", "assistant", reply, 2, "u", []),
    }
    path = write_json(tmp_path / "export.json", [owui("chat-2", messages, "a")])

    assert turns(only(read(path, "openwebui"))) == [
        ("user", "[image]\n[file: field-notes.pdf]\nWhich bird? مرحبا"),
        ("assistant", "It is a robin 🐦."),
    ]


def test_openwebui_without_history_reads_the_message_list(tmp_path: Path) -> None:
    listed = [
        {"id": "m1", "role": "user", "content": "Hello", "timestamp": int(T0 + 5)},
        {
            "id": "m2",
            "role": "assistant",
            "content": [{"type": "text", "text": "Hi there"}],
            "timestamp": int(T0 + 6),
        },
    ]
    # A very old export: the chat object itself, dated in milliseconds.
    legacy = {
        "id": "old-1",
        "title": "Old",
        "messages": listed,
        "history": {"messages": {}, "currentId": None},
        "timestamp": int((T0 + 4) * 1000),
    }
    path = write_json(tmp_path / "export.json", [owui("chat-3", None, listed=listed), legacy])

    new, old = read(path, "openwebui")

    said = [Msg("user", "Hello", at(5)), Msg("assistant", "Hi there", at(6))]
    assert new == Source("openwebui:chat-3", "Kyoto", AT0, said)
    assert old == Source("openwebui:old-1", "Old", at(4), said)


def test_openwebui_empty_and_broken_chats(tmp_path: Path) -> None:
    loop = {"a": om("a", "user", "x", 1, "b", ["b"]), "b": om("b", "assistant", "y", 2, "a", ["a"])}
    lone = {"u": om("u", "user", "x", 1, None, [])}
    chats = [
        owui("empty", {}),
        owui("lost-current", lone, "gone"),
        owui("loop", loop, "a"),
        {**owui("bad-chat", None), "chat": "text"},
        {**owui("bad-time", None), "created_at": "soon"},
        {"id": "stray", "title": "not a chat"},
        owui("good", None, listed=[{"role": "user", "content": "hi", "timestamp": int(T0)}]),
    ]
    path = write_json(tmp_path / "export.json", chats)

    results = list(read(path, "openwebui"))

    assert [r for r in results if isinstance(r, Source)] == [
        Source("openwebui:empty", "Kyoto", AT0, []),
        Source("openwebui:good", "Kyoto", AT0, [Msg("user", "hi", AT0)]),
    ]
    assert broken(results) == [
        ("openwebui:lost-current", "history.currentId 'gone' is not among its messages"),
        ("openwebui:loop", "the parents of message 'a' loop back to 'a'"),
        ("openwebui:bad-chat", "'chat' is a JSON string, not a JSON object"),
        ("openwebui:bad-time", "created_at 'soon' is not a time in seconds"),
        ("openwebui:stray", "has no 'chat'"),
    ]


# -- detect ---------------------------------------------------------------------------------


def test_detect_tells_each_format_by_its_shape(tmp_path: Path) -> None:
    chats = [simple_gpt("c", "hi", "hello")]
    claudes = [claude("c", [cm("h", "human", "hi", 1)])]

    assert detect(write_json(tmp_path / "gpt.json", chats)) == "chatgpt"
    assert detect(write_zip(tmp_path / "gpt.zip", {"conversations.json": chats})) == "chatgpt"
    assert detect(write_json(tmp_path / "claude.json", claudes)) == "claude"
    assert detect(write_zip(tmp_path / "claude.zip", {"conversations.json": claudes})) == "claude"
    assert detect(write_json(tmp_path / "owui.json", [owui("c", None)])) == "openwebui"
    # Unzipped and zipped again under another name: the export inside a folder.
    again = {"data-2024/conversations.json": claudes, "data-2024/users.json": []}
    assert detect(write_zip(tmp_path / "backup", again)) == "claude"
    # No conversations: told by the files beside them.
    gpt_empty: dict[str, Any] = {"conversations.json": [], "message_feedback.json": []}
    assert detect(write_zip(tmp_path / "e1.zip", gpt_empty)) == "chatgpt"
    assert (
        detect(write_zip(tmp_path / "e2.zip", {"conversations.json": [], "projects.json": []}))
        == "claude"
    )
    with pytest.raises(FileBroken, match=r"e3\.json: holds no conversations to tell it by"):
        detect(write_json(tmp_path / "e3.json", []))


def test_detect_knows_caesar_jsonl_by_its_first_line_alone(tmp_path: Path) -> None:
    line = {"created_at": "2024-06-01T10:00:00Z", "messages": [{"role": "user", "content": "hi"}]}
    path = tmp_path / "history.jsonl"
    # Only the first non-blank line is read: what follows is not even JSON.
    path.write_text("\n  \n" + json.dumps(line) + "\n{not json at all\n", encoding="utf-8")

    assert detect(path) == "caesar"


# -- files that cannot be read --------------------------------------------------------------


def test_truncated_json_names_the_file_the_format_and_where(tmp_path: Path) -> None:
    text = json.dumps([simple_gpt("c", "hi", "hello")], indent=1)
    cut = text[: text.index('"title": "Ch') + len('"title": "Ch')]
    quote = cut.rindex('"')
    line, column = cut.count("\n") + 1, quote - cut.rindex("\n")
    path = tmp_path / "conversations.json"
    path.write_text(cut, encoding="utf-8")

    with pytest.raises(FileBroken) as raised:
        read(path, "chatgpt")  # before anything is iterated
    assert str(raised.value) == (
        f"{path}: cannot be read as a ChatGPT export: not valid JSON: Unterminated string "
        f"starting at (line {line}, column {column})"
    )
    with pytest.raises(FileBroken) as raised:
        detect(path)
    assert str(raised.value) == (
        f"{path}: not valid JSON: Unterminated string starting at (line {line}, column {column}) "
        + KNOWN
    )


def test_truncated_json_inside_a_zip_names_the_member(tmp_path: Path) -> None:
    text = json.dumps([claude("c", [])], indent=2)
    cut = text[: text.index("}")].rstrip()  # ends: "uuid": "acct-1"
    line, column = cut.count("\n") + 1, len(cut) - cut.rindex("\n")
    path = write_zip(tmp_path / "export.zip", {"conversations.json": cut})

    with pytest.raises(FileBroken) as raised:
        read(path, "claude")
    assert str(raised.value) == (
        f"{path} (conversations.json): cannot be read as a Claude export: not valid JSON: "
        f"Expecting ',' delimiter (line {line}, column {column})"
    )


def test_a_truncated_zip_and_a_zip_without_conversations(tmp_path: Path) -> None:
    many = [simple_gpt(f"c{n}", "hi " * 50, "ok") for n in range(20)]
    whole = write_zip(tmp_path / "whole.zip", {"conversations.json": many})
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    photos = write_zip(tmp_path / "photos.zip", {"a.png": "x", "b/readme.txt": "y"})

    with pytest.raises(
        FileBroken,
        match=r"^\S+cut\.zip: cannot be read as a ChatGPT export: not a readable \.zip \(truncated or corrupt: ",
    ):
        read(cut, "chatgpt")
    with pytest.raises(
        FileBroken, match=r"^\S+cut\.zip: not a readable \.zip \(truncated or corrupt: "
    ):
        detect(cut)
    with pytest.raises(FileBroken) as raised:
        detect(photos)
    assert str(raised.value) == (
        f"{photos}: a .zip with no conversations.json in it (it holds a.png, readme.txt) " + KNOWN
    )


def test_not_json_and_unknown_shapes_name_the_formats(tmp_path: Path) -> None:
    prose = tmp_path / "notes.txt"
    prose.write_text("Dear diary,\ntoday I", encoding="utf-8")
    unknown = write_json(tmp_path / "other.json", [{"question": "hi", "answer": "hello"}])
    number = write_json(tmp_path / "number.json", 42)
    photo = tmp_path / "photo.json"
    photo.write_bytes(b"\xff\xd8\xff\xe0 JFIF")

    def message(path: Path) -> str:
        with pytest.raises(FileBroken) as raised:
            detect(path)
        return str(raised.value)

    assert FORMATS == ("chatgpt", "claude", "openwebui", "caesar")
    assert message(prose) == f"{prose}: not valid JSON: Expecting value (line 1, column 1) {KNOWN}"
    assert message(unknown) == (
        f"{unknown}: its conversations are each a JSON object with keys 'question', 'answer', "
        f"in no format caesar knows {KNOWN}"
    )
    assert message(number) == (
        f"{number}: expected a JSON array of conversations, found a JSON number {KNOWN}"
    )
    assert message(photo) == f"{photo}: not UTF-8 text (byte 0) {KNOWN}"


def test_reading_a_file_as_another_format_says_what_it_looks_like(tmp_path: Path) -> None:
    claudes = write_json(tmp_path / "conversations.json", [claude("c", [])])
    other = write_json(tmp_path / "x.json", [{"a": 1}])

    with pytest.raises(FileBroken) as raised:
        read(claudes, "chatgpt")
    assert str(raised.value) == (
        f"{claudes}: not a ChatGPT export: its conversations have no 'mapping' "
        "(it looks like a Claude export)"
    )
    with pytest.raises(FileBroken) as raised:
        read(other, "openwebui")
    assert str(raised.value) == (
        f"{other}: not an Open WebUI chat export: its conversations have no 'chat'"
    )
    with pytest.raises(ValueError, match="not 'caesar'"):
        read(claudes, "caesar")

"""Recall by when (issue "Memory by time"): a message naming a span of time brings that span's
conversations; one that gathers brings every matching conversation, compactly. Real databases
(both engines), the real embedder, the real Brain.prepare."""

from __future__ import annotations

from datetime import datetime, timedelta

from conftest import OWNER
from memory_helpers import add_episode

from caesar.brain import Brain
from caesar.memory.recall.hybrid import DATE_POOL
from caesar.memory.render import EPISODES_HEADER
from caesar.memory.scope import Scope

# Wednesday 2 December 2026, 14:00 UTC — 03:00 on Thursday in Auckland (UTC+13)
NOW = datetime(2026, 12, 2, 14, 0)
TOPICS = [
    "We planned a birthday dinner for the operator's mother at an Italian place.",
    "The operator asked how to repot a fiddle-leaf fig without shocking it.",
    "We compared two savings accounts and their monthly fees.",
    "The operator wanted a packing list for a weekend camping trip.",
    "We went through a recipe for sourdough bread and its starter.",
    "The operator asked for tips on learning to play the ukulele.",
    "We drafted an email to the landlord about a leaking tap.",
]


def _ids(recalled) -> list[int]:
    return [e.episode_id for e in recalled]


def test_what_did_we_talk_about_yesterday_brings_yesterdays_conversations(make_services, db_url):
    # "yesterday" is the operator's: in Auckland at 03:00 on Thursday it is Wednesday, the
    # UTC day of NOW. Unrelated in meaning to the message, they come with no threshold,
    # newest first, and nothing from other days comes with them.
    services = make_services(database_url=db_url, timezone="Pacific/Auckland")
    by_day: dict[int, list[int]] = {}
    for back in range(12):
        for k, hour in enumerate((1, 6)):  # 01:00 and 06:00 UTC: 14:00 and 19:00 in Auckland
            when = datetime(2026, 12, 2, hour) - timedelta(days=back)
            # the same topic again on another day is another conversation: a distinct line
            topic = TOPICS[(back * 2 + k) % len(TOPICS)].replace(".", f", take {back * 2 + k}.")
            episode, _ = add_episode(services, topic, when)
            by_day.setdefault(back, []).append(episode)
    ctx = Brain(services).prepare("What did we talk about yesterday?", now=NOW, scope=Scope(OWNER))
    # Auckland's Wednesday 2 December = UTC back=0 rows (14:00 and 19:00 local)
    assert _ids(ctx.recalled) == list(reversed(by_day[0]))
    assert all(e.dated for e in ctx.recalled)
    threshold = services.settings.memory.episodes_recall.similarity_threshold
    assert min(e.cosine for e in ctx.recalled) < threshold  # no threshold on a time-only ask
    system = ctx.messages[0]["content"]
    assert "Wed 2 Dec 2026, yesterday" in system and EPISODES_HEADER in system

    three = Brain(services).prepare(
        "Remind me what we discussed three days ago.", now=NOW, scope=Scope(OWNER)
    )
    assert sorted(_ids(three.recalled)) == sorted(by_day[2])
    week = Brain(services).prepare("What did we chat about last week?", now=NOW, scope=Scope(OWNER))
    # Auckland's last week: Monday 23 – Sunday 29 November, local
    assert sorted(_ids(week.recalled)) == sorted(i for b in range(3, 10) for i in by_day[b])
    nothing = Brain(services).prepare(
        "What did we talk about next Tuesday?", now=NOW, scope=Scope(OWNER)
    )
    assert nothing.recalled == []


def test_a_time_and_a_topic_rank_the_span_by_topic_first(make_services, db_url):
    services = make_services(database_url=db_url, timezone="UTC")
    in_span_run, _ = add_episode(
        services,
        "The operator asked about pacing a 10k run; caesar suggested negative splits.",
        NOW - timedelta(days=8),
    )
    in_span_other, _ = add_episode(
        services,
        "We drafted an email to the landlord about a leaking tap.",
        NOW - timedelta(days=7),
    )
    outside_run, _ = add_episode(
        services,
        "The operator asked about pacing a 10k run; caesar suggested a steady tempo.",
        NOW - timedelta(days=30),
    )
    ctx = Brain(services).prepare(
        "What did you suggest last week about my 10k run?", now=NOW, scope=Scope(OWNER)
    )
    ids = _ids(ctx.recalled)
    assert ids[0] == in_span_run and ctx.recalled[0].dated
    assert in_span_other in ids  # held last week: it comes, after the one on topic
    # the strong topic match outside the span may come, after the span's
    if outside_run in ids:
        assert ids.index(outside_run) > ids.index(in_span_other)


def test_a_long_spans_older_conversation_on_topic_comes_before_its_newer_ones(
    make_services, db_url
):
    # "in the last two months" holds more conversations than the date pool takes (its newest):
    # the one on topic, older than all of them, is held in the span all the same and leads
    services = make_services(database_url=db_url, timezone="UTC")
    on_topic, _ = add_episode(
        services,
        "The operator bought twenty kilos of layer feed for the chickens at the farm store.",
        NOW - timedelta(days=50),
    )
    newer = []
    for k in range(DATE_POOL + 5):
        topic = TOPICS[k % len(TOPICS)].replace(".", f", take {k}.")
        episode, _ = add_episode(services, topic, NOW - timedelta(days=1 + k))
        newer.append(episode)
    ctx = Brain(services).prepare(
        "How much chicken feed did I buy in the last two months?", now=NOW, scope=Scope(OWNER)
    )
    assert _ids(ctx.recalled)[0] == on_topic
    assert ctx.recalled[0].dated


def test_a_question_that_gathers_shows_every_matching_conversation(make_services, db_url):
    services = make_services(database_url=db_url, timezone="UTC")
    runs = []
    for k, distance in enumerate((3, 5, 8, 10, 13, 21, 34, 40, 55)):
        episode, _ = add_episode(
            services,
            f"The operator went running {distance} km along the river and told caesar how it went.",
            NOW - timedelta(days=5 * k + 1),
        )
        runs.append(episode)
    for k in range(30):
        topic = TOPICS[k % len(TOPICS)].replace(".", f", take {k}.")
        add_episode(services, topic, NOW - timedelta(days=k + 0.5))
    plain = Brain(services).prepare(
        "What did I say about running along the river?", now=NOW, scope=Scope(OWNER)
    )
    gathered = Brain(services).prepare(
        "How many times did I go running along the river?", now=NOW, scope=Scope(OWNER)
    )
    assert set(runs) <= set(_ids(gathered.recalled))
    assert len(_ids(plain.recalled)) < len(runs)  # in depth, fewer conversations fit
    # one dated line each, newest first: the model can count them
    system = gathered.messages[0]["content"]
    lines = [line for line in system.splitlines() if line.startswith("- ")]
    assert len(lines) >= len(runs)
    assert all(" ago:" in line or "yesterday:" in line for line in lines)
    # ... each with what it said of running (its telling turn, in place of its summary)
    block = system[system.index("- ") :]
    assert block.count("went running") >= len(runs)


def test_an_old_conversation_is_recalled_with_the_shipped_defaults(make_services, db_url):
    # no age wall: a strong match from over a year ago still comes
    services = make_services(database_url=db_url)
    old, _ = add_episode(
        services,
        "The operator's grandmother's secret plum dumpling recipe uses quark dough.",
        NOW - timedelta(days=400),
    )
    ctx = Brain(services).prepare(
        "How do I make grandmother's plum dumplings?", now=NOW, scope=Scope(OWNER)
    )
    assert _ids(ctx.recalled) == [old]

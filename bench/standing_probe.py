"""Does what a person says about themselves reach a later request it bears on? (issue #46)

The shape of the issue's held-out probe, with statements and requests of our own: one
statement, said once in its own chat 6 to 45 days earlier, among 60 real unrelated
conversations (LongMemEval sessions, ../shared/data); later, in a new chat, a request it bears
on whose words barely overlap with it ("suggest a dinner recipe" after "I keep a gluten-free
diet"). A probe counts when the statement's mark (a word or two only it says) is in the prompt
the chat model gets: the full prompt (openai/anthropic routes, 6,000 characters of recall) and
the embedded model's small one (2,500).

Four sets: `A`, the first written; `B`, the same kinds of thing in other words (other people,
foods, tools, requests), written after A was measured and not tuned on; `C`, statements said in
passing inside a request or a project chat; `D`, C's kinds in other words, not tuned on.

The 60 conversations are imported and learned once (the shipped offline workers); each probe
then copies that database, imports its statement's chat, runs the workers and builds the
request's prompt in-process (Brain.prepare), so every probe is alone with the 60.

    .venv/bin/python bench/standing_probe.py [--sets A B] [--crowd] [--json]
    .venv/bin/python bench/standing_probe.py --preference   # LongMemEval's preference questions
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import recall_quality as rq
from benchlib import OWNER

from caesar.brain import Brain
from caesar.db import migrate
from caesar.importer import import_conversations
from caesar.services import Services
from caesar.workers import run_until_caught_up

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NOW = datetime(2026, 11, 20, 18, 30)
CACHE = Path(tempfile.gettempdir()) / "caesar-standing-probe" / "vectors.sqlite"
STANDING: dict[str, Any] = {}  # --chars / --statements: the block's budget, else shipped
REPLY = "Thanks for telling me, I'll keep that in mind."


@dataclass(frozen=True)
class Probe:
    told: str  # the person's message, in a chat of its own
    request: str  # later, in a new chat
    mark: str  # what only the statement says (lower case)


A = (
    Probe(
        "I keep a gluten-free diet because of coeliac disease.",
        "Can you suggest a dinner recipe for tonight?",
        "gluten-free",
    ),
    Probe(
        "Just so you know, I'm vegetarian.",
        "What should I cook for my parents on Sunday?",
        "vegetarian",
    ),
    Probe(
        "I have a severe peanut allergy, so I'm always careful.",
        "What snacks should I bring to the office party?",
        "peanut",
    ),
    Probe("Please always use metric units with me.", "How far is a half marathon?", "metric"),
    Probe(
        "Keep your answers short, I read them on my phone.",
        "Explain how a heat pump works.",
        "short",
    ),
    Probe(
        "My partner Alex and I just adopted a cat called Miso.",
        "Any tips for keeping the sofa free of scratches?",
        "miso",
    ),
    Probe("I work night shifts at the hospital.", "How can I get better sleep?", "night shift"),
    Probe(
        "I'm allergic to penicillin.",
        "I have a bad sore throat, should I ask my doctor for antibiotics?",
        "penicillin",
    ),
    Probe(
        "My daughter Lily is seven and obsessed with dinosaurs.",
        "What should I get for a birthday present next month?",
        "lily",
    ),
    Probe(
        "I'm afraid of flying, always have been.",
        "How should I get from London to Rome for my holiday?",
        "flying",
    ),
    Probe(
        "I use a MacBook Air for all my work.",
        "Which video editing software should I buy?",
        "macbook",
    ),
    Probe(
        "I'm on a tight budget this year.",
        "Where should I go on holiday in the summer?",
        "tight budget",
    ),
    Probe("I don't drink alcohol.", "What should I order at a wine bar on Friday?", "alcohol"),
    Probe(
        "When I ask about code, please always include the library versions.",
        "How do I parse a CSV file in Python?",
        "library versions",
    ),
    Probe("Call me Sam, please.", "Can you write a short greeting for my team?", "sam"),
    Probe("I'm lactose intolerant.", "Can you suggest a dessert for a dinner party?", "lactose"),
    Probe("I have type 2 diabetes.", "What's a good breakfast before a long hike?", "diabetes"),
    Probe("I live in Porto.", "What is there to do this weekend?", "porto"),
    Probe(
        "I hate cilantro, it tastes like soap to me.",
        "Give me a recipe for fish tacos.",
        "cilantro",
    ),
    Probe("Please answer in Spanish from now on.", "What is the capital of Australia?", "spanish"),
    Probe(
        "I have two dogs, a beagle and a husky.", "Can you recommend a car for my family?", "beagle"
    ),
    Probe(
        "I'm training for a marathon in April.",
        "What should my weekly schedule look like?",
        "marathon",
    ),
    Probe(
        "I have a bad knee from an old football injury.",
        "Can you suggest some exercises to get fit?",
        "knee",
    ),
    Probe("I mostly code in Rust these days.", "Which web framework should I learn next?", "rust"),
    Probe(
        "I'm a nurse, so I know the medical basics.",
        "Can you explain what a blood test measures?",
        "nurse",
    ),
    Probe(
        "I don't use emojis and I'd rather you didn't either.",
        "Write a message to invite friends to a barbecue.",
        "emojis",
    ),
    Probe(
        "I'm terrified of spiders.",
        "Which countries are good for a hiking trip in the jungle?",
        "spiders",
    ),
    Probe(
        "I have an iPhone 13 Pro.",
        "Can you suggest some useful accessories for my phone?",
        "iphone",
    ),
    Probe("I'm a huge fan of jazz.", "What should I do on my evening off in New Orleans?", "jazz"),
    Probe("I can't stand horror films.", "Recommend a movie for tonight.", "horror"),
    Probe(
        "We have a small balcony but no garden.",
        "Which vegetables could I grow this spring?",
        "balcony",
    ),
    Probe("I'm pregnant, due in March.", "Can I still go to the sauna at my gym?", "pregnant"),
    Probe(
        "I prefer detailed answers with examples.", "What is a closure in JavaScript?", "detailed"
    ),
    Probe("I'm learning Japanese.", "What should I read on my commute?", "japanese"),
    Probe("I'm a vegan.", "Which pizza toppings should I order?", "vegan"),
    Probe("My wife Priya is a pharmacist.", "What should I get for our anniversary?", "priya"),
    Probe(
        "I work from home most days.",
        "How can I stay more active during the week?",
        "work from home",
    ),
    Probe(
        "I don't eat pork for religious reasons.",
        "Can you suggest a recipe for a barbecue?",
        "pork",
    ),
    Probe("I'm saving up for a house.", "Should I buy a new car this year?", "saving up"),
    Probe("I have asthma.", "Is it a good idea to go running when it's freezing?", "asthma"),
    Probe("I love spicy food.", "What should I make for dinner?", "spicy"),
    Probe(
        "I get up at 5 every morning for work.", "When is the best time for me to exercise?", "at 5"
    ),
)
B = (
    Probe("FYI I follow a strict keto diet.", "Any ideas for a quick lunch?", "keto"),
    Probe(
        "I'm pescatarian, by the way.", "What should I grill at the summer party?", "pescatarian"
    ),
    Probe(
        "I'm allergic to shellfish.",
        "We're going to a seafood restaurant in Lisbon, what should I order?",
        "shellfish",
    ),
    Probe(
        "Always give temperatures in Fahrenheit for me.",
        "How warm is it in Cairo in June?",
        "fahrenheit",
    ),
    Probe("Please keep replies brief.", "How does a mortgage work?", "brief"),
    Probe(
        "Our rabbit Clover lives indoors with us.", "How do I protect my cables at home?", "clover"
    ),
    Probe("I work early shifts at the bakery.", "What time should I go to bed?", "early shift"),
    Probe("I'm allergic to ibuprofen.", "I've got a headache, what can I take?", "ibuprofen"),
    Probe(
        "My son Tomás is four and loves trains.", "What day trip could we do on Saturday?", "tomás"
    ),
    Probe("I'm scared of heights.", "What should we do on our trip to Paris?", "heights"),
    Probe("I use Linux on all my computers.", "Which password manager should I install?", "linux"),
    Probe("My budget for the wedding is 8,000 euros.", "How should we pick a venue?", "8,000"),
    Probe("I don't drink coffee.", "What can I have to wake up in the morning?", "coffee"),
    Probe(
        "From now on, please always give me sources for facts.", "Why is the sky blue?", "sources"
    ),
    Probe(
        "Please call me Dr. Okafor.", "Draft a reply to a patient who asked for a refill.", "okafor"
    ),
    Probe("I'm gluten intolerant.", "What can I bake for my colleague's birthday?", "gluten"),
    Probe("I have high blood pressure.", "Is a sauna good after a workout?", "blood pressure"),
    Probe("I live near Edinburgh.", "Where could I go for a walk on Sunday?", "edinburgh"),
    Probe("I really dislike mushrooms.", "Give me a risotto recipe.", "mushrooms"),
    Probe(
        "Please reply in German from now on.",
        "What are the opening hours of most museums?",
        "german",
    ),
    Probe("I have three cats.", "Which plants are good for my living room?", "three cats"),
    Probe(
        "I'm training for a triathlon in June.",
        "How should I plan my meals this month?",
        "triathlon",
    ),
    Probe("I have a bad back.", "Which mattress should I buy?", "bad back"),
    Probe("I mostly code in Go at work.", "Which testing tool should we adopt?", " go "),
    Probe("I'm a primary school teacher.", "Can you help me plan next week?", "teacher"),
    Probe(
        "No bullet points please, I prefer plain paragraphs.",
        "Summarise the causes of the First World War.",
        "bullet points",
    ),
    Probe("I'm afraid of dogs.", "Which park should I go running in?", "dogs"),
    Probe("I have a Pixel 8.", "How can I make my battery last longer?", "pixel"),
    Probe(
        "I'm really into board games.",
        "What can we do with friends on a rainy evening?",
        "board games",
    ),
    Probe("I don't like crowded places.", "Where should I go for New Year's Eve?", "crowded"),
    Probe(
        "We rent a tiny flat in the city centre.",
        "What furniture should I get for guests?",
        "tiny flat",
    ),
    Probe(
        "I'm breastfeeding my newborn.",
        "Can I have a glass of wine at the wedding?",
        "breastfeeding",
    ),
    Probe("I like step-by-step answers.", "How do I change a bike tyre?", "step-by-step"),
    Probe("I'm learning to play the cello.", "What concerts should I go to this autumn?", "cello"),
    Probe(
        "I'm a vegetarian and my husband eats everything.",
        "What should we cook on Friday night?",
        "vegetarian",
    ),
    Probe(
        "My brother Karim is a chef in Marseille.",
        "What gift could I send for his birthday?",
        "karim",
    ),
    Probe(
        "I work remotely for a company in Toronto.", "When should I schedule my calls?", "toronto"
    ),
    Probe("I don't eat beef.", "What should I order at a steakhouse?", "beef"),
    Probe("I'm saving for a trip to Japan.", "Is it worth buying a new laptop now?", "japan"),
    Probe("I have migraines.", "Should I go to the music festival this weekend?", "migraine"),
)


# Said in passing inside a request or a project chat ("I'm vegetarian, so could you suggest a
# lunch?", "when you write SQL for me, always use PostgreSQL syntax"): written after A and B,
# before the shapes that read them
C = (
    Probe(
        "I'm looking for a new case for my iPhone 14 Plus, any good brands?",
        "What accessories would be handy for my phone?",
        "iphone",
    ),
    Probe(
        "I already have a Kindle Paperwhite, but I'm thinking about audiobooks too. Which services are good?",
        "What should I read on holiday?",
        "kindle",
    ),
    Probe(
        "I'm building an expense tracker in Django. From now on, when you show me code, use type hints.",
        "How do I write a function that sums a list of invoices?",
        "type hints",
    ),
    Probe(
        "For this project I'd rather avoid heavy dependencies, because it runs on a Raspberry Pi. How do I read a sensor over I2C?",
        "Which library should I use to parse dates?",
        "dependencies",
    ),
    Probe(
        "When you write SQL for me, always use PostgreSQL syntax. How do I count rows per day?",
        "How do I get the top five customers by revenue?",
        "postgresql",
    ),
    Probe(
        "We deploy everything with Docker Compose on a single VPS. How do I add a healthcheck?",
        "How should I add Redis to our setup?",
        "docker compose",
    ),
    Probe(
        "My garden gets full sun all afternoon, so what should I plant along the south fence?",
        "Which herbs could I grow this year?",
        "full sun",
    ),
    Probe(
        "I just downloaded the Duolingo app to practise Italian before my trip. Is it any good?",
        "How can I learn some phrases for Rome?",
        "duolingo",
    ),
    Probe(
        "Since I started working from home, I barely move. Any desk stretches?",
        "How can I stay fit during the week?",
        "working from home",
    ),
    Probe(
        "I'm vegetarian, so could you suggest a filling lunch for a long hike?",
        "What can I make for a picnic?",
        "vegetarian",
    ),
    Probe(
        "Please always show prices in euros when you compare things for me. Which e-reader is cheaper?",
        "Which robot vacuum is worth buying?",
        "euros",
    ),
    Probe(
        "My team uses Jira for everything, how do I make a sprint report?",
        "How can I track my team's progress better?",
        "jira",
    ),
    Probe(
        "I drive a 2015 Honda Civic. How often should I change the oil?",
        "What should I check before a long road trip?",
        "honda",
    ),
    Probe(
        "I have two toddlers at home, so I need recipes that are quick. Any ideas for weeknights?",
        "What should I cook tonight?",
        "toddlers",
    ),
    Probe(
        "I do all my writing in Obsidian. How do I link notes together?",
        "How should I organise my research notes?",
        "obsidian",
    ),
    Probe(
        "I'm on a student budget this term. Where can I find cheap textbooks?",
        "Where should I go for a weekend away?",
        "student budget",
    ),
    Probe(
        "I'm colour blind, so charts with red and green confuse me. How do I read this heatmap?",
        "Make me a chart of monthly sales.",
        "colour blind",
    ),
    Probe(
        "I'd prefer you explain things without maths formulas, I'm not a maths person. What is inflation?",
        "How do interest rates work?",
        "formulas",
    ),
    Probe(
        "I shoot with a Fujifilm X-T4, what lens should I get for portraits?",
        "What settings should I use for night photos?",
        "fujifilm",
    ),
    Probe(
        "We have a golden retriever called Maple who sheds a lot. Which vacuum is good for that?",
        "How can I keep my car clean?",
        "maple",
    ),
    Probe(
        "Keep code examples minimal please, I just want the idea. How do I reverse a string in Go?",
        "How do I read a file line by line?",
        "minimal",
    ),
    Probe(
        "I've been doing CrossFit four times a week. How much protein do I need?",
        "What should I eat before a workout?",
        "crossfit",
    ),
    Probe(
        "I run a small bakery in Leeds and I'm updating the menu. Any ideas for autumn bakes?",
        "How can I get more customers in January?",
        "bakery",
    ),
    Probe(
        "I'm a night owl and do my best work after midnight. How do I plan deep work?",
        "When should I schedule my study sessions?",
        "night owl",
    ),
    Probe(
        "I use Neovim as my editor. How do I set up a Python linter?",
        "What plugins would help me write JavaScript?",
        "neovim",
    ),
    Probe(
        "I can't eat anything with sesame, it makes me really sick. Is hummus safe?",
        "What should I order at a Lebanese restaurant?",
        "sesame",
    ),
    Probe(
        "I prefer trains over planes whenever I can. How long is Paris to Amsterdam?",
        "How should I get to Berlin next month?",
        "trains",
    ),
    Probe(
        "Our house has a wood-burning stove. How do I clean the glass?",
        "How can I keep the living room warm this winter?",
        "wood-burning stove",
    ),
    Probe(
        "I'm a Spurs season ticket holder, what's the fixture list like?",
        "What should I do this Saturday afternoon?",
        "spurs",
    ),
    Probe(
        "My laptop is a ThinkPad X1 Carbon running Fedora. How do I update the BIOS?",
        "Which backup tool should I use?",
        "thinkpad",
    ),
    Probe(
        "I'm retired and have plenty of time. What volunteering could I do?",
        "How should I spend my mornings?",
        "retired",
    ),
    Probe(
        "Always give me the metric and imperial amounts in recipes. How much flour for a loaf?",
        "How do I make pancakes?",
        "imperial",
    ),
    Probe(
        "I'm trying to cut down on sugar, so which breakfast cereals are best?",
        "What dessert can I bring to a party?",
        "sugar",
    ),
    Probe(
        "I play the piano, mostly classical. Which pieces are good for sight reading?",
        "What concerts should I go to this spring?",
        "piano",
    ),
    Probe(
        "I'm nervous around big dogs. Is a dog park a good place to jog?",
        "Where should I go running this weekend?",
        "big dogs",
    ),
    Probe(
        "My mother lives with us and uses a wheelchair. Which museums are accessible?",
        "Where should we go for a family day out?",
        "wheelchair",
    ),
    Probe(
        "I keep kosher. Which wines are good for Passover?",
        "What should I cook for Friday dinner?",
        "kosher",
    ),
    Probe(
        "I host a podcast about urban cycling. How do I get better audio?",
        "What gear should I buy with my birthday money?",
        "podcast",
    ),
    Probe(
        "I only have 20 minutes a day to exercise. What routine would work?",
        "How can I get stronger this year?",
        "20 minutes",
    ),
    Probe(
        "I speak French at home with my kids. What French cartoons are good?",
        "What books should I get for my children?",
        "french",
    ),
)
# The same kinds in other words, written before C's shapes were coded and not tuned on
D = (
    Probe(
        "Which screen protector fits my Galaxy S23 best?",
        "Suggest some gadgets for my phone.",
        "galaxy",
    ),
    Probe(
        "I'm coeliac, so is sourdough safe for me?",
        "What should I bake this weekend?",
        "coeliac",
    ),
    Probe(
        "Going forward, when you give me shell commands, assume I'm on macOS.",
        "How do I find large files on disk?",
        "macos",
    ),
    Probe(
        "I'd rather not use any cloud services for my photos, what are my options for backups?",
        "How should I share holiday pictures with my family?",
        "cloud services",
    ),
    Probe(
        "We store all our customer data in MongoDB. How do I add an index?",
        "How should we design the orders schema?",
        "mongodb",
    ),
    Probe(
        "I recently installed Home Assistant on an old laptop. How do I add Zigbee lights?",
        "How can I automate my heating?",
        "home assistant",
    ),
    Probe(
        "My flat only gets morning light, which houseplants would survive?",
        "What could I grow on the windowsill?",
        "morning light",
    ),
    Probe(
        "I have three teenagers, how do I get them to do chores?",
        "What should we do as a family on Sunday?",
        "teenagers",
    ),
    Probe(
        "I'm a morning person and I'm sharpest before 9. When should I study?",
        "How should I plan my exam revision?",
        "morning person",
    ),
    Probe(
        "I ride a Brompton to work every day. How do I fix a squeaky chain?",
        "What should I wear in the rain?",
        "brompton",
    ),
    Probe(
        "I'm on a fixed income now, so which phone plan is cheapest?",
        "Where could we go for our anniversary?",
        "fixed income",
    ),
    Probe(
        "Keep the code short please, I only need the gist. How do I sort a dict by value?",
        "How do I merge two lists?",
        "short",
    ),
    Probe(
        "I can't have caffeine after noon or I don't sleep. Is green tea ok in the evening?",
        "What can I drink at the afternoon meeting?",
        "caffeine",
    ),
    Probe(
        "Our kitchen has an induction hob, so which pans should I buy?",
        "What's a good one-pot dinner?",
        "induction",
    ),
    Probe(
        "I play the violin in an amateur orchestra. How can I practise vibrato?",
        "What should I do with my free evenings?",
        "violin",
    ),
    Probe(
        "We have a border collie named Pepper, how much exercise does she need?",
        "Where should we go on holiday this summer?",
        "pepper",
    ),
    Probe(
        "I avoid anything with artificial sweeteners. Are diet sodas bad?",
        "What drinks should I get for the barbecue?",
        "sweeteners",
    ),
    Probe(
        "I write a newsletter about local history. How do I grow my subscribers?",
        "What should I post on social media this week?",
        "newsletter",
    ),
    Probe(
        "I only have an hour a week for side projects. How do I pick one?",
        "Should I learn a new programming language this year?",
        "an hour a week",
    ),
    Probe(
        "I speak Portuguese and a bit of Spanish. Is Italian easy for me?",
        "Which country should I visit in the spring?",
        "portuguese",
    ),
    Probe(
        "Whenever you recommend books, tell me the page count too.",
        "What's a good novel for a long flight?",
        "page count",
    ),
    Probe(
        "I got a Nintendo Switch for Christmas, which games are good for two players?",
        "What can I do on a rainy day?",
        "switch",
    ),
    Probe(
        "I'm scared of deep water, is snorkelling a bad idea?",
        "What should we do in Bali?",
        "deep water",
    ),
    Probe(
        "I'd prefer you skip the pleasantries and get to the point.",
        "How do I renew my passport?",
        "pleasantries",
    ),
    Probe(
        "My MacBook Pro is from 2019, is it worth upgrading?",
        "Which photo editing app should I use?",
        "macbook",
    ),
    Probe(
        "I've been swimming three times a week since January. Should I add weights?",
        "How can I improve my endurance?",
        "swimming",
    ),
    Probe(
        "I do my budgeting in YNAB, how do I handle irregular income?",
        "How should I save for a holiday?",
        "ynab",
    ),
    Probe(
        "I'm halal, so which sweets contain gelatine?",
        "What should I bring to the office party?",
        "halal",
    ),
    Probe(
        "My partner and I live in a tiny studio, how do we make space for a desk?",
        "Where should I put a Christmas tree?",
        "tiny studio",
    ),
    Probe(
        "I shoot on a Canon R6, what settings for concerts?",
        "How do I take better photos of my kids?",
        "canon",
    ),
)


def filler(count: int, seed: int = 7) -> list[rq.Conversation]:
    """`count` LongMemEval sessions, no question's evidence, on dates over the last 90 days."""
    rng = random.Random(seed)
    sessions: dict[str, list[dict[str, str]]] = {}
    for folder in ("longmemeval_s", "longmemeval_s_more"):
        for path in sorted((DATA / folder).glob("*.json")):
            item = json.loads(path.read_text())
            evidence = set(item["answer_session_ids"])
            for key, turns in zip(
                item["haystack_session_ids"], item["haystack_sessions"], strict=True
            ):
                if key not in evidence and key not in sessions:
                    sessions[key] = [{"role": t["role"], "content": t["content"]} for t in turns]
    keys = rng.sample(sorted(sessions), count)
    out = []
    for key in keys:
        when = NOW - timedelta(days=rng.uniform(1, 90))
        turns = rq.importable(sessions[key])
        if turns is not None:
            out.append(rq.Conversation(key, when, turns))
    return out


def learn(services: Services) -> None:
    for name in ("memory.extract", "memory.summarise", "memory.passages"):
        run_until_caught_up(services.workers[name])


def settings(home: Path, small: bool) -> Any:
    base = rq.bench_settings(home)
    data = base.model_dump(mode="python")
    unused = data["gateway"]["providers"]["unused"]
    unused["prompt"] = "small" if small else "full"
    unused["recall_chars"] = 2500 if small else 6000
    data["gateway"]["providers"]["unused"] = unused
    # resolved from the route when the settings load: the route's, not the base's
    data["memory"]["episodes_recall"].pop("prompt_chars")
    data["memory"]["standing"].pop("max_chars")
    data["memory"]["standing"].update(STANDING)
    return type(base)(**data)


def told_chat(probe: Probe, when: datetime) -> dict[str, Any]:
    messages = [{"role": "user", "content": probe.told}, {"role": "assistant", "content": REPLY}]
    return {"created_at": when.isoformat(), "messages": messages}


def build_base(home: Path, embedder: Any, crowd: tuple[Probe, ...] = ()) -> None:
    """The 60 conversations, learned; `crowd`: statements told before them too, each in a chat
    of its own over the last 90 days (a person who has said many things)."""
    services = Services.build(settings(home, False))
    services.embedder.set(embedder)
    migrate.upgrade(services.db)
    chats = [{"created_at": c.created_at.isoformat(), "messages": c.messages} for c in filler(60)]
    rng = random.Random(11)
    chats += [told_chat(p, NOW - timedelta(days=rng.uniform(1, 90))) for p in crowd]
    import_conversations(services, chats, person=OWNER)
    learn(services)
    services.close()


def run_probe(base: Path, probe: Probe, index: int, embedder: Any) -> dict[str, Any]:
    rng = random.Random(index)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        shutil.copy(base / "caesar.db", home / "caesar.db")
        told_at = NOW - timedelta(days=rng.uniform(6, 45))
        out: dict[str, Any] = {"told": probe.told, "request": probe.request, "mark": probe.mark}
        for small in (False, True):
            services = Services.build(settings(home, small))
            services.embedder.set(embedder)
            if not small:
                import_conversations(services, [told_chat(probe, told_at)], person=OWNER)
                learn(services)
                out["learned"] = [
                    m.text
                    for m in services.standing.list(person=OWNER)
                    if probe.mark in m.text.lower()
                ]
            ctx = Brain(services).prepare(probe.request, now=NOW, person=OWNER)
            prompt = "\n".join(m["content"] for m in ctx.messages).lower()
            prompt = prompt.replace(probe.request.lower(), "")
            out["small" if small else "full"] = probe.mark in prompt
            services.close()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["A", "B"])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--crowd",
        action="store_true",
        help="also tell every statement of another set first (B for A, A for the rest: ~40 more)",
    )
    parser.add_argument(
        "--preference",
        action="store_true",
        help="LongMemEval's single-session-preference questions instead of the probe sets",
    )
    parser.add_argument("--chars", type=int, help="[memory.standing] max_chars")
    parser.add_argument("--statements", type=int, help="[memory.standing] max_statements")
    args = parser.parse_args()
    if args.chars is not None:
        STANDING["max_chars"] = args.chars
    if args.statements is not None:
        STANDING["max_statements"] = args.statements
    embedder = rq.CachedEmbedder(_embedder(), CACHE)
    results: dict[str, list[dict[str, Any]]] = {}
    if args.preference:
        rows = preference_run(embedder)
        shown_all = sum(r["all_evidence_shown"] for r in rows)
        stated = sum(r["evidence_statement_in_prompt"] for r in rows)
        learned = sum(bool(r["evidence_statements"]) for r in rows)
        print(
            f"single-session-preference: {len(rows)} questions; every evidence session shown "
            f"{shown_all}; a statement learned from the evidence session {learned}; one in "
            f"the prompt {stated}"
        )
        return
    sets = {"A": A, "B": B, "C": C, "D": D}
    for name in args.sets:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            crowd = sets["B" if name == "A" else "A"] if args.crowd else ()
            build_base(base, embedder, crowd)
            probes = sets[name]
            results[name] = [run_probe(base, p, i, embedder) for i, p in enumerate(probes)]
    for name, rows in results.items():
        full = sum(r["full"] for r in rows)
        small = sum(r["small"] for r in rows)
        learned = sum(bool(r["learned"]) for r in rows)
        print(
            f"set {name}: {len(rows)} probes; learned {learned}; in the full prompt {full} "
            f"({full / len(rows):.3f}); in the small prompt {small} ({small / len(rows):.3f})"
        )
        for r in rows:
            if args.verbose or not (r["full"] and r["small"]):
                print(
                    f"  full={int(r['full'])} small={int(r['small'])} learned={r['learned'][:1]} "
                    f"| {r['told']} -> {r['request']}"
                )
    if args.json:
        json.dump(results, sys.stdout, indent=1)


def _embedder() -> Any:
    from caesar.config import Settings
    from caesar.embeddings import MiniLMEmbedder

    return MiniLMEmbedder(Settings())


def preference_questions() -> list[dict[str, Any]]:
    """LongMemEval's single-session-preference questions (../shared/data): the nearest public
    proxy of a chat's preferences reaching a later request (issue #46)."""
    found = []
    for folder in ("longmemeval_s", "longmemeval_s_more"):
        for path in sorted((DATA / folder).glob("*.json")):
            item = json.loads(path.read_text())
            if item["question_type"] == "single-session-preference":
                found.append(item)
    return sorted(found, key=lambda q: q["question_id"])


def preference_run(embedder: Any) -> list[dict[str, Any]]:
    """Each question's haystack imported and learned (extract, summarise, passages); then the
    question's prompt at its date: every evidence session shown (the past-conversations
    block), and a standing statement said in an evidence session in the prompt."""
    rows = []
    for item in preference_questions():
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            services = Services.build(settings(home, False))
            services.embedder.set(embedder)
            migrate.upgrade(services.db)
            keys, chats = [], []
            for key, turns, when in zip(
                item["haystack_session_ids"],
                item["haystack_sessions"],
                item["haystack_dates"],
                strict=True,
            ):
                clean = rq.importable([{"role": t["role"], "content": t["content"]} for t in turns])
                if clean is not None:
                    keys.append(key)
                    chats.append({"created_at": _lme_date(when).isoformat(), "messages": clean})
            report = import_conversations(services, chats, person=OWNER)
            session_of_audit = dict(zip(report.audit_ids, keys, strict=False))
            learn(services)
            evidence = set(item["answer_session_ids"])
            ctx = Brain(services).prepare(
                item["question"], now=_lme_date(item["question_date"]), person=OWNER
            )
            seen = {session_of_audit.get(e.audit_log_id, "") for e in ctx.recalled}
            said = {
                m.id: session_of_audit.get(m.source_audit_id or 0, "")
                for m in services.standing.list(person=OWNER)
            }
            standing = [said.get(i, "") for i in ctx.standing_ids]
            rows.append(
                {
                    "qid": item["question_id"],
                    "all_evidence_shown": evidence <= seen,
                    "evidence_statement_in_prompt": any(k in evidence for k in standing),
                    "evidence_statements": sum(1 for k in said.values() if k in evidence),
                }
            )
            print("  ", rows[-1], flush=True)
            services.close()
    return rows


def _lme_date(text: str) -> datetime:
    """'2023/05/20 (Sat) 05:04' → datetime(2023, 5, 20, 5, 4)."""
    day, _, rest = text.partition(" (")
    return datetime.strptime(f"{day} {rest.partition(') ')[2]}", "%Y/%m/%d %H:%M")


if __name__ == "__main__":
    main()

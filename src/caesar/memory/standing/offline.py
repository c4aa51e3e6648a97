"""Standing statements found with no LLM: the person's own sentences, by shape. Pure.

Only what the person typed (`user` turns) is read; caesar's replies, recalled memory (the
extractor cuts `<memory>` blocks before this runs) and pasted text are not. A sentence is
taken only in a shape that says something about the speaker: "I'm vegetarian", "I have a
severe peanut allergy", "my daughter is seven", "always use metric units". What it cannot
place is left alone, never guessed: questions, hypotheticals ("if I were vegan"), what someone
else is ("my friend is vegan"), requests for a piece of writing ("write a story where I …").

The statement keeps its own words ("I keep a gluten-free diet because of coeliac disease"),
cut to MAX_TEXT characters at a word. `about` is the thing it is about, in a normal form
("peanuts", "fish"): what tells a restatement or a change of mind from a new statement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from caesar.memory.standing import kinds

MAX_TEXT = 200
# A message this long is a document the person pasted (an essay to edit, a log): only its
# first and last paragraphs are taken as their own words.
DOCUMENT_CHARS = 1500
MAX_PER_MESSAGE = 6


@dataclass(frozen=True)
class Statement:
    kind: str
    slot: str
    text: str
    about: str = ""
    polarity: int = 1  # -1: the person does not / no longer ("I don't eat meat")
    change: bool = False  # says it changed ("again now", "no longer", "these days")
    confidence: float = 0.8

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "slot": self.slot,
            "text": self.text,
            "about": self.about,
            "polarity": self.polarity,
            "change": self.change,
            "confidence": self.confidence,
        }


_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+|(?<=[.!?])(?=[A-Z])")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_LIST_ITEM = re.compile(r"^\s*(?:[*•+-]|\d{1,2}[.)])\s.*$", re.MULTILINE)
_QUOTED = re.compile(r"^\s*>.*$", re.MULTILINE)
# What opens a sentence without changing what it says ("Oh, and by the way, I'm vegan")
_OPENER = re.compile(
    r"^(?:(?:(?:oh|well|yes|yeah|no|ok|okay|hi|hello|hey|thanks|thank you|anyway|honestly|"
    r"fyi|btw|fun fact|to be honest|for context|for the record|as you know|just so you know|"
    r"by the way)[,:;!.-]+\s*|(?:also|and|but|so|btw|fyi|actually|plus|anyway|oh|well|hi|"
    r"hello|hey|by the way|just so you know|as you know|fun fact)\s+))+",
    re.IGNORECASE,
)
# Not about how things are: a wish, a hypothetical, a piece of writing, someone else's words
_NOT_SAID = re.compile(
    r"\b(?:if|unless|imagine|pretend|suppose|supposing|hypothetically|what if|let'?s say|"
    r"(?<!\bi )(?<!\bwe )(?:write|draft|compose)(?: me)? (?:a|an|the|some|my)\b|story|poem|essay|character|"
    r"role ?play|scenario|lyrics|script|"
    r"(?:he|she|they) (?:said|says|told)|wondering whether|wonder if)\b",
    re.IGNORECASE,
)
# Said it changed: what tells "I eat fish again now" from a contradiction
_CHANGE = re.compile(
    r"\b(?:again|anymore|any more|no longer|not any ?more|these days|nowadays|now|"
    r"recently (?:started|stopped|switched|became|went)|started|stopped|quit|switched|"
    r"gave up|went back to|used to)\b",
    re.IGNORECASE,
)
# An instruction that would take away caesar's own rules is never learned (issue #46)
_UNSAFE = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass|disable|drop|remove|skip|break)\b.{0,40}"
    r"\b(?:rules?|instructions?|guidelines?|polic(?:y|ies)|safety|filters?|restrictions?|"
    r"limits?|system prompt|programming|training|guardrails?)\b|"
    r"\b(?:no|without|any) (?:rules|restrictions|limits|filters|censorship|guardrails)\b|"
    r"\b(?:jailbreak|jailbroken|developer mode|dan mode|unfiltered|uncensored|"
    r"you are no longer|you are now|act as|pretend (?:you are|to be))\b",
    re.IGNORECASE,
)

_I_AM = r"\b(?:i'?m|i’m|i am|we're|we’re|we are)"
_I = r"\b(?:i|we)"
_ADV = (
    r"(?:\s+(?:really|also|usually|generally|mostly|always|actually|still|just|totally|"
    r"absolutely|strictly|currently|basically|mainly|definitely|pretty much|kind of|"
    r"do|recently|finally|have|had|already|now|only))*"
)
_NEG = (
    r"(?P<neg>\s+(?:don'?t|don’t|do not|can'?t|can’t|cannot|never|no longer|won'?t|"
    r"shouldn'?t|try not to|avoid|rarely|hardly ever))?"
)
_OBJ = r"(?P<obj>[^.!?;\n]{2,90}?)"
_OBJ_END = r"(?=\s*(?:[.!?;,\n]|$|\s+(?:and|but|so|because|since|which|as|though)\b))"

_DIETS = (
    r"vegetarian|vegan|pescatarian|pescetarian|flexitarian|lactose[- ]intolerant|gluten[- ]free|"
    r"dairy[- ]free|keto|paleo|kosher|halal|teetotal|sober|diabetic|coeliac|celiac|plant[- ]based|"
    r"low[- ]carb|low[- ]sodium|low[- ]fat|sugar[- ]free|nut[- ]free|[a-z]+[- ]intolerant|"
    r"intolerant to [a-z -]{2,30}"
)
_FOODS = (
    r"meat|red meat|fish|seafood|shellfish|pork|beef|chicken|lamb|poultry|dairy|cheese|milk|eggs?|"
    r"gluten|wheat|bread|pasta|sugar|carbs|nuts|peanuts|soy|spicy food|sweets|rice|mushrooms|"
    r"onions|garlic|cilantro|coriander|tofu|processed food|junk food|fast food|fried food|"
    r"animal products|honey|bacon|sushi|oysters|olives|tomatoes|avocado"
)
# What a diet leaves out: "I eat fish again now" changes "I'm vegetarian" (kinds of conflict a
# pattern can see; an LLM route sees more).
DIET_EXCLUDES = {
    "vegetarian": {
        "meat",
        "red meat",
        "fish",
        "seafood",
        "shellfish",
        "pork",
        "beef",
        "chicken",
        "lamb",
        "poultry",
        "bacon",
        "sushi",
        "oysters",
    },
    "pescatarian": {"meat", "red meat", "pork", "beef", "chicken", "lamb", "poultry", "bacon"},
    "gluten-free": {"gluten", "wheat", "bread", "pasta"},
    "dairy-free": {"dairy", "cheese", "milk"},
    "lactose-intolerant": {"dairy", "cheese", "milk"},
    "keto": {"carbs", "sugar", "bread", "pasta", "rice"},
    "low-carb": {"carbs", "sugar", "bread", "pasta", "rice"},
    "sober": {"alcohol", "wine", "beer"},
    "teetotal": {"alcohol", "wine", "beer"},
    "coeliac": {"gluten", "wheat", "bread", "pasta"},
    "celiac": {"gluten", "wheat", "bread", "pasta"},
}
DIET_EXCLUDES["vegan"] = DIET_EXCLUDES["vegetarian"] | {
    "dairy",
    "cheese",
    "milk",
    "eggs",
    "egg",
    "honey",
    "animal products",
}
DIET_EXCLUDES["pescetarian"] = DIET_EXCLUDES["pescatarian"]
DIET_EXCLUDES["plant-based"] = DIET_EXCLUDES["vegan"]

_CONDITIONS = (
    r"diabetes|type [12] diabetes|asthma|celiac disease|coeliac disease|arthritis|adhd|autism|"
    r"epilepsy|migraines?|high blood pressure|hypertension|low blood pressure|anxiety|depression|"
    r"insomnia|a bad back|a bad knee|bad knees|back pain|knee pain|a heart condition|ibs|"
    r"crohn'?s(?: disease)?|tinnitus|dyslexia|colou?r ?blindness|a disability|chronic [a-z]+|"
    r"sleep apnoea|sleep apnea|acid reflux|gerd|eczema|psoriasis|a pacemaker|high cholesterol|"
    r"an? (?:old |recent )?(?:knee|back|shoulder|ankle|hip|wrist) injury|a torn [a-z]+|"
    r"lupus|fibromyalgia|ms|multiple sclerosis|ptsd|ocd|hearing loss|vertigo|a heart murmur"
)
_STATES = (
    r"pregnant|diabetic|asthmatic|epileptic|deaf|hard of hearing|blind|colou?r ?blind|disabled|"
    r"in a wheelchair|dyslexic|autistic|immunocompromised|on medication|on blood thinners|"
    r"prediabetic|anemic|anaemic|nursing|breastfeeding"
)
_NOT_PET = r"(?! (?:plants?|trees?|breasts?|fillets?|thighs?|wings|nuggets|sauce|food|stock|broth|tanks?|and chips))"
_PETS = (
    r"dogs?|cats?|pupp(?:y|ies)|kittens?|rabbits?|bunn(?:y|ies)|hamsters?|parrots?|horses?|"
    r"goldfish|fish|turtles?|tortoises?|guinea pigs?|birds?|snakes?|lizards?|geckos?|ferrets?|"
    r"chickens?|budgies?|parakeets?|rats?|mice|chinchillas?|pony|ponies|"
    r"retrievers?|labradors?|labs?|terriers?|spaniels?|poodles?|collies?|shepherds?|beagles?|"
    r"huskies|husky|dachshunds?|corgis?|pugs?|bulldogs?|greyhounds?|whippets?|boxers?|"
    r"schnauzers?|chihuahuas?|labradoodles?|cockapoos?|rottweilers?|dobermanns?|dobermans?|"
    r"setters?|pointers?|tabby|tabbies|maine coons?|siamese|ragdolls?|bengals?"
)
_KIN = (
    r"wife|husband|partner|spouse|boyfriend|girlfriend|fianc[ée]e?|kids?|children|child|sons?|"
    r"daughters?|twins|baby|toddler|mother|mum|mom|father|dad|parents|grandmother|grandfather|"
    r"grandma|grandpa|grandparents|grandchildren|grandkids?|brothers?|sisters?|siblings|"
    r"niece|nephew|in-laws|stepson|stepdaughter|family"
)
_DEVICES = (
    r"iphone(?: \d+)?(?: pro| max| mini| plus)*|android(?: phone)?|pixel(?: \d+)?|samsung|galaxy|"
    r"mac(?:book)?(?: pro| air)?|imac|ipad|kindle|pc|laptop|chromebook|windows (?:pc|laptop|\d+)|"
    r"linux|tesla|apple watch|fitbit|garmin|playstation|ps5|xbox|nintendo switch|"
    r"(?:dslr|mirrorless) camera|raspberry pi|3d printer|smart ?watch|e-?bike|car|bike"
)
# Named things a person owns or uses: "my iPhone 13 Pro", "my Honda Civic" (a plain "my car"
# says little about them)
_BRANDS = (
    r"(?:iphone|ipad|ipod|airpods|apple watch|macbook|imac|mac mini|galaxy|pixel|oneplus|"
    r"xiaomi|kindle|kobo|surface|thinkpad|chromebook|dell xps|lenovo|asus|fitbit|garmin|"
    r"oura ring|peloton|playstation|ps[45]|xbox|nintendo switch|switch|steam deck|oculus|"
    r"meta quest|quest [23]|gopro|fujifilm|canon|nikon|sony a\d+|lumix|dji|roomba|"
    r"thermomix|instant pot|air fryer|vitamix|nespresso|tesla|prius|honda|toyota|"
    r"volkswagen|vw|ford|bmw|audi|subaru|mazda|kia|hyundai|volvo|nissan|skoda|"
    r"brompton|raspberry pi|arduino|synology|sonos|echo|alexa|google home|nest|"
    r"ring doorbell|hue lights|home assistant)\b(?:[ -](?:(?-i:[A-Z0-9])[\w-]*|pro|max|mini|plus|air|ultra)\b)*"
)
_INSTRUMENTS = (
    r"piano|guitar|electric guitar|bass|violin|viola|cello|double bass|drums|saxophone|sax|"
    r"flute|clarinet|trumpet|trombone|oboe|harp|ukulele|banjo|mandolin|accordion|organ|"
    r"keyboard|harmonica"
)
_SPORTS = (
    r"tennis|golf|football|soccer|basketball|volleyball|badminton|squash|rugby|cricket|"
    r"hockey|padel|pickleball|table tennis|ping pong|chess|bridge|poker|netball|baseball|"
    r"softball|water polo|ultimate frisbee|darts|snooker|pool|video games|dungeons (?:and|&) dragons|d&d"
)
_HABITS = (
    r"swimming|running|cycling|climbing|bouldering|yoga|pilates|crossfit|boxing|karate|judo|"
    r"jiu[- ]jitsu|dancing|hiking|rowing|lifting|weightlifting|weights|spinning|skating|"
    r"surfing|skiing|meditating|meditation|journaling|baking|knitting|painting|gardening"
)
_JOB_WORD = (
    r"(?:[a-z]*(?:er|or|ist|ian|ant|ent|eer|ect|ive|ic|ary|man|woman|person|nurse|chef|"
    r"cook|pilot|doctor|dentist|vet|surgeon|paramedic|student|teacher|tutor|writer|"
    r"designer|lawyer|barista))"
)
_NOT_JOBS = frozenset(
    "beginner member user owner lover fan fanatic believer follower big huge bit little lot "
    "other rather better newer older number never ever forever sucker whatever however "
    "quarter corner winner loser reader viewer listener person woman man loyalist regular "
    "customer subscriber patron".split()
)
_LANGUAGES = (
    r"english|spanish|french|german|italian|portuguese|dutch|polish|swedish|norwegian|danish|"
    r"finnish|greek|turkish|russian|ukrainian|arabic|hebrew|hindi|japanese|chinese|mandarin|"
    r"cantonese|korean|vietnamese|thai|indonesian|czech|hungarian|romanian|welsh|irish|catalan"
)
_ANSWER = (
    r"(?:answers?|repl(?:y|ies)|responses?|explanations?|it|things|messages|"
    r"code(?: examples| samples| snippets)?|examples)"
)

# (slot, pattern). The order is the order of preference: a sentence gives one statement, by
# the first shape that fits. Instructions that name what they ask (units, length …) and
# constraints come first: "I'm vegetarian, so please keep that in mind" is the diet.
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (slot, re.compile(pattern, re.IGNORECASE))
    for slot, pattern in (
        # -- instructions to caesar -------------------------------------------------------
        (
            "address",
            r"\b(?:please )?(?:call me|address me as|refer to me as) (?P<obj>(?-i:[A-Z])[\w'’ -]{0,30}?)"
            + _OBJ_END,
        ),
        (
            "units",
            r"\b(?P<obj>metric|imperial|celsius|fahrenheit|kilomet(?:er|re)s|miles|kilograms|kg|pounds|lbs)\b(?: units?| system| measurements)?",
        ),
        (
            "language",
            r"\b(?:answer|reply|respond|talk|speak|write|chat)(?: to me)?(?: only)? in (?P<obj>"
            + _LANGUAGES
            + r")\b",
        ),
        (
            "length",
            r"\b(?:keep|make)(?: your| the| all)? "
            + _ANSWER
            + r" (?P<obj>short|shorter|brief|concise|simple|minimal|to the point|under \d+ words|detailed|long|longer)\b",
        ),
        (
            "length",
            r"\bi (?:prefer|like|want|need)(?: it)?(?: when you give me)? (?P<obj>short|shorter|brief|concise|detailed|longer|in-depth|step-by-step|simple) "
            + _ANSWER,
        ),
        (
            "format",
            r"\b(?:no|without|don'?t use|do not use|never use|avoid) (?P<obj>emojis?|jargon|bullet points|markdown|tables|exclamation marks|headers|lists)\b",
        ),
        (
            "format",
            r"\b(?:use|give me|format (?:it|answers|replies) as|always use) (?P<obj>bullet points|numbered lists|tables|markdown|code blocks|plain text)\b",
        ),
        # -- constraints ------------------------------------------------------------------
        (
            "allergy",
            _I_AM
            + _ADV
            + r"(?: severely| very| deathly| mildly| highly)? allergic to (?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "allergy",
            _I
            + r"(?: have| got)(?: a| an)?(?: severe| mild| bad| serious| life-threatening| slight)? (?P<obj>[a-z -]{2,40}?) allergy\b",
        ),
        ("allergy", r"\bmy (?P<obj>[a-z -]{2,40}?) allergy\b"),
        (
            "diet",
            _I_AM
            + _ADV
            + r"(?: a| an)?(?: strict| committed| lifelong| full-time)? (?P<obj>"
            + _DIETS
            + r")\b",
        ),
        (
            "diet",
            _I
            + _ADV
            + r" (?:keep|follow|eat|stick to|maintain|try to eat|am on|'m on|’m on|went|have gone|'ve gone)(?: to)?(?: a| an| mostly)?(?: strict)? (?P<obj>[a-z-]+(?:[ -][a-z]+)?) diet\b",
        ),
        ("diet", _I + _NEG + r" (?:eat|eating)(?: any)? (?P<obj>" + _FOODS + r")\b"),
        ("diet", _I + _ADV + r" (?:keep|eat|observe) (?P<obj>kosher|halal)\b"),
        (
            "diet",
            _I
            + r"(?P<neg> can'?t| can’t| cannot| mustn'?t| must not)(?: eat| have| digest| tolerate)"
            r"(?: anything with| anything containing| any)? (?P<obj>[a-z][a-z'’ -]{1,40}?)"
            + _OBJ_END,
        ),
        (
            "diet",
            _I
            + r"(?:'ve| have)? (?:stopped|quit|given up|gave up|cut out|cutting out) (?:eating )?(?P<obj>"
            + _FOODS
            + r")\b",
        ),
        (
            "drink",
            _I + _NEG + r" drink(?: any)?(?P<obj> alcohol| coffee| caffeine| beer| wine| soda)?\b",
        ),
        (
            "health",
            _I
            + _ADV
            + r"(?: have| got| suffer from| live with|'ve been diagnosed with|’ve been diagnosed with| was diagnosed with| have been diagnosed with| was just diagnosed with)(?: a| an)?(?: mild| severe| bad| chronic)? (?P<obj>"
            + _CONDITIONS
            + r")\b",
        ),
        ("health", _I_AM + _ADV + r" (?P<obj>" + _STATES + r")\b"),
        ("budget", r"\bmy budget(?: for [a-z ]{2,30})? is (?P<obj>[^.!?;\n]{2,60}?)" + _OBJ_END),
        (
            "budget",
            _I_AM
            + r"(?: on| working with| living on) (?:a |an )?(?P<obj>(?:(?:tight|limited|small|strict|modest|shoestring|student|fixed|low|tiny) budget)|fixed income|pension|low income)\b",
        ),
        (
            "budget",
            _I
            + r" (?:can only|can't|cannot|can’t) (?:afford|spend)(?P<obj> [^.!?;\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "schedule",
            _I
            + _ADV
            + r" (?:work|started working|have been working|'ve been working|’ve been working) (?P<obj>night shifts?|nights|the night shift|early shifts?|late shifts?|weekends|from home|remotely|part[- ]time|full[- ]time|[a-z0-9-]+ shifts|\d+[- ]hour shifts)\b",
        ),
        (
            "schedule",
            _I
            + _ADV
            + r" (?:wake up|get up|go to bed|go to sleep|start work|finish work|get off work|leave work)(?P<obj> (?:at|around|by|before|after) [^.!?;,\n]{1,30})",
        ),
        (
            "schedule",
            _I_AM
            + r"(?: only)? (?P<obj>(?:free|available|busy|off|at work|working) (?:on|in|during|after|before|until) (?:weekends?|weekdays?|(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?|mornings?|afternoons?|evenings?|nights?|the (?:morning|afternoon|evening|weekend)|\d[^.!?;,\n]{0,20}|noon|midnight|lunch(?:time)?)\b)",
        ),
        (
            "fear",
            _I_AM
            + _ADV
            + r"(?: really| very| so| quite| a bit| a little)? (?:afraid|scared|terrified|frightened|fearful|nervous) of (?P<obj>[^.!?;,\n]{2,50}?)"
            + _OBJ_END,
        ),
        (
            "schedule",
            _I_AM
            + _ADV
            + r" (?:a |an )?(?:total |real |natural |big )?(?P<obj>night owl|early bird|early riser|morning person|evening person|night person|shift worker)\b",
        ),
        (
            "schedule",
            _I
            + _ADV
            + r" have (?P<obj>(?:\d+|an?|one|two|three|four|five|half an) (?:minutes?|hours?)(?: or so)? (?:a|per|each|every) (?:day|week|weekday|evening|morning|night|weekend))\b",
        ),
        (
            "fear",
            _I_AM
            + _ADV
            + r"(?: really| very| so| quite| a bit| a little)? (?:afraid|scared|terrified|frightened|nervous|anxious|uneasy) around (?P<obj>[^.!?;,\n]{2,50}?)"
            + _OBJ_END,
        ),
        (
            "fear",
            _I
            + r" have (?:a |an )?(?:real |serious |irrational )?(?:fear|phobia) of (?P<obj>[^.!?;,\n]{2,50}?)"
            + _OBJ_END,
        ),
        (
            "answers",
            r"(?:^|\bplease |\bfrom now on,? |\bin (?:the )?future,? |\bgoing forward,? |"
            r"\bwhenever [^,]{0,60}, |\bwhen i ask[^,]{0,60}, |\bif i ask[^,]{0,60}, |"
            r"\bwhen you (?:give|show|write|suggest|recommend|explain|answer|reply|make|"
            r"list|compare|send)[^,]{0,60}, |\bi(?:'d| would|’d) (?:prefer|rather|like it if)"
            r"(?: it if)? you |\bi prefer (?:it )?when you |"
            r"\bi'?d like you to |\bi’d like you to |\bi want you to |\bi need you to |"
            r"\bmake sure (?:to |you |that you )|\bremember to |\b(?:can|could|would) you )"
            r"(?:please )?(?P<neg>always |never |don'?t |do not |stop )?(?P<obj>(?:use|give|"
            r"include|add|write|answer|reply|respond|format|show|mention|put|start|end|explain|"
            r"assume|suggest|recommend|say|keep|list|cite|check|remind|ask|skip|avoid|spell|"
            r"round|convert|summari[sz]e|provide|break|limit|number|highlight|translate|"
            r"comment|quote|focus|double-check|talk|call|refer to|tell|let me know|note|warn|"
            r"flag|link|label)\b[^.!?\n]{3,150})",
        ),
        # -- preferences ------------------------------------------------------------------
        (
            "dislikes",
            _I
            + r"(?:'d|’d| would) rather (?:not(?! (?:mention|say|share|go into|discuss|talk about|disclose|reveal|name|give|get into|answer))(?: use| have| eat| do| go)?|avoid|skip|stay away from|steer clear of) (?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "dislikes",
            _I
            + r"(?: always| usually| generally| try to| tend to)? (?:avoid|steer clear of|stay away from) (?:anything with |anything containing |any )?(?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "dislikes",
            _I
            + _ADV
            + r" (?:hate|dislike|can'?t stand|can’t stand|detest|loathe|don'?t like|do not like|don’t like|don'?t enjoy|do not enjoy|am not into|'m not into|’m not into) (?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "dislikes",
            _I_AM
            + r" not (?:a |really a )?(?:big |huge )?fan of (?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "likes",
            _I
            + _ADV
            + r" (?:love|like|enjoy|adore|prefer|am into|'m into|’m into|'d rather|’d rather|would rather|'d prefer|’d prefer|would prefer) (?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "likes",
            _I_AM
            + _ADV
            + r" (?:a |such a )?(?:big |huge |massive |real )?(?:fan of|into|obsessed with|passionate about|crazy about|a sucker for) (?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "likes",
            r"\bmy (?:absolute |all-time )?favou?rite (?P<obj>[a-z ]{2,30} (?:is|are) [^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "likes",
            _I + _ADV + r" play (?:the )?(?P<obj>" + _INSTRUMENTS + r"|" + _SPORTS + r")\b",
        ),
        (
            "likes",
            _I
            + r"(?:'ve|’ve| have)? (?:been )?(?:doing |going |practi[cs]ing )?(?P<obj>"
            + _HABITS
            + r")\b(?=[^.!?]{0,30}\b(?:times? a|every|each|twice|once a|since|for (?:years|months|\d+)))",
        ),
        # -- who they are -----------------------------------------------------------------
        ("name", r"\bmy name(?:'s| is) (?P<obj>(?-i:[A-Z])[\w'’-]+(?: (?-i:[A-Z])[\w'’-]+)?)"),
        (
            "pet",
            _I
            + _ADV
            + r" (?:have|own|got|adopted|rescued|just got|just adopted)(?P<obj> (?:a|an|two|three|four|five|\d+)(?: [a-z-]+){0,2}? (?:"
            + _PETS
            + r"))\b"
            + _NOT_PET,
        ),
        (
            "pet",
            r"\b(?:my|our) (?P<obj>(?:[a-z-]+ )?(?:"
            + _PETS
            + r"))(?:,? (?-i:[A-Z])[\w'’-]+,?)? (?:is|are|was|named|called|loves|hates|has|just|turned|needs|gets|keeps|sleeps|lives)\b",
        ),
        (
            "family",
            _I
            + _ADV
            + r" have (?P<obj>(?:a|an|one|two|three|four|five|\d+)(?: young| little| teenage| grown(?:-up)?| adult| baby| newborn| twin)? (?:kids?|children|sons?|daughters?|grandchildren|grandkids|siblings|brothers?|sisters?|twins|stepsons?|stepdaughters?|toddlers?|babies|teenagers?|teens|stepkids|stepchildren))\b",
        ),
        (
            "family",
            _I_AM
            + _ADV
            + r" (?P<obj>(?:a |an )?(?:mum|mom|dad|father|mother|parent|grandparent|grandmother|grandfather|single parent|stepmom|stepdad|married|divorced|engaged|widowed|newlywed|a new parent|expecting (?:a baby|a child|twins|our first|my first|a boy|a girl)))\b",
        ),
        (
            "family",
            r"\bmy (?P<obj>"
            + _KIN
            + r")(?:,? (?-i:[A-Z])[\w'’-]+,?)? (?:(?:is|are) (?:\d|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
            r"(?:a |an |our |my )?(?:baby|toddler|newborn|teen(?:ager)?|student|adult|only child|"
            r"twins?)|in (?:school|college|kindergarten|university|nursery|year \d|grade \d)|"
            r"at (?:school|college|university)|called|named|turning|away|allergic|vegan|"
            r"vegetarian|autistic|deaf|disabled|diabetic|pregnant|(?:a|an) (?:[a-z-]+ )?"
            + _JOB_WORD
            + r"\b(?! of\b| fan| lover| enthusiast))|was born|just turned|turned|"
            r"turns|started|goes to|lives)\b",
        ),
        (
            "family",
            r"^(?:my|our) (?P<obj>"
            + _KIN.removesuffix("|family")
            + r") (?:(?-i:[A-Z])[\w'’-]+ )?and i\b",
        ),
        (
            "home",
            _I
            + _ADV
            + r" (?:live|am living|'m living|’m living) (?P<obj>(?:in|near|on|at|outside|by) [^.!?;,\n]{2,60}?|alone|with [^.!?;,\n]{2,40}?)"
            + _OBJ_END,
        ),
        (
            "home",
            _I + _ADV + r" (?:moved|relocated) (?:to|into) (?P<obj>[^.!?;,\n]{2,60}?)" + _OBJ_END,
        ),
        (
            "home",
            _I_AM
            + r" (?:originally )?(?:from|based in) (?P<obj>(?-i:[A-Z])[^.!?;,\n]{1,50}?)"
            + _OBJ_END,
        ),
        (
            "home",
            _I
            + _ADV
            + r" (?:have|own|rent|live in)(?P<obj> (?:a|an)(?: small| big| tiny| large| little| new| old)? (?:garden|balcony|backyard|yard|apartment|flat|house|studio|allotment|cottage|condo|townhouse|farm))\b",
        ),
        (
            "home",
            r"^(?:my|our) (?P<obj>(?:house|home|flat|apartment|garden|balcony|kitchen|place|studio|yard|backyard|bedroom|office|allotment|garage)(?: only)? (?:has|gets|faces|is on|is in|is a|is an|is tiny|is small|doesn'?t have|has no)\b[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "work",
            _I
            + _ADV
            + r" (?:host|run|write|have|make|publish|started) (?P<obj>(?:a|an|my own|our own) (?:[a-z-]+ )?(?:podcast|blog|newsletter|youtube channel|channel|etsy shop|online shop|small business|business|bakery|caf[eé]|restaurant|shop|company|startup|farm|food truck))\b",
        ),
        ("work", _I + _ADV + r" work (?P<obj>(?:as|at|for|in) [^.!?;,\n]{2,60}?)" + _OBJ_END),
        (
            "work",
            _I_AM
            + _ADV
            + r" (?P<obj>(?:a|an) (?:[a-z-]+ ){0,2}?"
            + _JOB_WORD
            + r")\b(?! of\b| fan| lover| enthusiast| buff| nerd| junkie)",
        ),
        (
            "work",
            _I_AM
            + _ADV
            + r" (?P<obj>retired|self-employed|freelancing|a freelancer|unemployed|between jobs|a stay-at-home [a-z]+|studying [^.!?;,\n]{2,40}?)"
            + _OBJ_END,
        ),
        (
            "work",
            r"\bi"
            + _ADV
            + r" (?:teach|run|own|manage|study) (?P<obj>[^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
        (
            "uses",
            _I
            + _ADV
            + r" (?:use|have|own|got|bought|drive|'m using|’m using|am using|code in|program in|work with|write code in)(?: a| an| the| my)?(?: new| brand new| old)? (?P<obj>"
            + _BRANDS
            + r"|"
            + _DEVICES
            + r")\b",
        ),
        (
            "uses",
            _I
            + _ADV
            + r" (?:drive|ride|cycle on|commute on|shoot (?:with|on)|take photos (?:with|on)) (?:a|an|my)(?: new| old)? (?P<obj>[^.!?;,\n]{2,40}?)"
            + _OBJ_END,
        ),
        (
            "uses",
            _I
            + _ADV
            + r" (?:downloaded|installed|signed up for|subscribed to|switched to|set up|started using|moved to)(?: the| a| an)? (?P<obj>(?-i:[A-Z])[\w+#.'’-]*(?: (?-i:[A-Z0-9])[\w+#.-]*)*)",
        ),
        (
            "uses",
            r"(?:\b(?:i|we)"
            + _ADV
            + r" (?:deploy|host|store|keep|track|manage|build|do|write|edit|plan|organi[sz]e|code|log|run)"
            r"(?: (?:everything|all|my|our|the|of)){1,3}(?: [a-z-]+){0,2}|\b(?:my|our) (?:team|company|office|school|work|job|family|household)(?: all)? uses?) "
            r"(?:(?:with|in|on|using|through) )?(?P<obj>(?-i:[A-Z])[\w+#.'’-]*(?: (?-i:[A-Z0-9])[\w+#.-]*)*)",
        ),
        ("uses", _I + _ADV + r" speak(?: fluent| some| a bit of)? (?P<obj>" + _LANGUAGES + r")\b"),
        (
            "uses",
            _I
            + _ADV
            + r" (?:use|'m using|’m using|am using|code in|program in|write code in|work with)(?: mostly)? (?P<obj>(?-i:[A-Z])[\w+#.'’-]*(?: (?-i:[A-Z0-9])[\w+#.-]*)*)",
        ),
        (
            "uses",
            r"\bmy (?P<obj>(?:phone|laptop|computer|car|camera|tablet|watch|editor|ide|os|router|tv) is (?:a|an|the) [^.!?;,\n]{2,40}?)"
            + _OBJ_END,
        ),
        (
            "goal",
            _I_AM
            + _ADV
            + r" (?P<obj>(?:training for|learning(?! something| a lot| so much| more| about| that)|practi[cs]ing|saving (?:up )?for|preparing for|studying for|working towards?|trying to (?:learn|lose|improve|build|save|quit|become|eat|sleep|cut)|aiming to|aiming for) [^.!?;\n]{2,80}?)"
            + _OBJ_END,
        ),
        (
            "goal",
            r"\bmy (?:main |big |new |current )?goal (?:is|this year is|for [a-z ]{2,20} is) (?P<obj>[^.!?;\n]{2,80}?)"
            + _OBJ_END,
        ),
        (
            "goal",
            _I
            + r"(?:'ve| have)? (?:recently |just )?(?:started|began|begun|taken up|took up) (?P<obj>(?:learning|training|taking|practi[cs]ing|running|playing|going to) [^.!?;,\n]{2,60}?)"
            + _OBJ_END,
        ),
    )
)
# "I like the idea", "I love the sound of the hot chocolate": a reaction to what was just
# suggested, not how things are for the person
_REACTION = re.compile(
    r"^(?:the|this|that|these|those|your|how|what|it|its|all|both|each|either)\b|"
    r"\b(?:idea|ideas|suggestion|suggestions|option|options|recommendation|sound of|look of|"
    r"list|plan|approach|tip|tips|answer|response|text|version|draft|example)\b",
    re.IGNORECASE,
)
# What makes a general instruction lasting: a word of every time ("I want you to …" alone asks
# for this turn)
_LASTING = re.compile(
    r"\b(?:always|never|from now on|going forward|in (?:the )?future|whenever|when i ask|"
    r"i(?:'d| would|’d) (?:prefer|rather)(?: it if)? you|i prefer (?:it )?when you|"
    r"if i ask|every time|each time|by default|in all|all (?:your|the|of your) "
    r"(?:answers|replies|responses|examples|code))\b",
    re.IGNORECASE,
)
# What makes an instruction standing rather than for this turn ("give it a heading")
_STANDING = re.compile(
    r"\b(?:always|never|from now on|going forward|in (?:the )?future|whenever|when i ask|"
    r"every time|each time|by default|in general|generally|i prefer|i'?d prefer|i’d prefer|"
    r"i'?d rather|i’d rather|i like|i want|i need)\b",
    re.IGNORECASE,
)
_SLOT_KIND = {name: slot.kind for name, slot in kinds.SLOTS.items()}
_PRONOUN_OBJECTS = frozenset(
    "it this that them these those him her you one some something anything everything "
    "nothing stuff things lot a lot".split()
)
_STOP = frozenset(
    "a an the my our your some any of to and or for with in on at by from very really so "
    "too more most much".split()
)


def _about(text: str) -> str:
    """The normal form of what a statement is about: lower case, no articles, no plural s."""
    words = [w for w in re.findall(r"[a-z0-9+#'-]+", text.lower()) if w not in _STOP]
    words = [
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words
    ]
    return " ".join(words)[:200]


def own_words(message: str, *, lists: bool = False) -> str:
    """What of a turn is the speaker's own: code, quoted lines and the middle of a pasted
    document are not; nor list items, unless `lists` (a reply's steps are what it said)."""
    text = _QUOTED.sub(" ", _FENCE.sub(" ", message))
    if not lists:
        text = _LIST_ITEM.sub(" ", text)
    if len(text) > DOCUMENT_CHARS:
        paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
        if len(paragraphs) < 2:  # one long block: a paste, not a message
            return text[:300] if "\n" not in text[:300] else ""
        text = paragraphs[0][:600] + "\n" + paragraphs[-1][:600]
    return text


def _clip(sentence: str) -> str:
    sentence = " ".join(sentence.split())
    if len(sentence) > MAX_TEXT:
        sentence = sentence[: MAX_TEXT - 1].rsplit(" ", 1)[0] + "…"
    return sentence


# "see which one I like better", "one that I like": the liking is not what the sentence says
_SUBORDINATE = re.compile(
    r"\b(?:that|which|what|whether|if|how|one|ones|something|anything|whatever|where|who)\s*$",
    re.IGNORECASE,
)
_LIKED_NOTHING = frozenset(
    "better best yet more most less least either too first second third last you number "
    "option".split()
)
# "I'll keep it simple": the person's own plan, not how caesar should answer
_OWN_PLAN = re.compile(
    r"\b(?:i'll|i’ll|i will|i'm going to|i’m going to|i am going to|i want to|i'd like to|"
    r"i’d like to|i would like to|i need to|we want to|i'm trying to|i’m trying to|i try to)\b",
    re.I,
)
# "keep your answers short": how caesar answers is named, so it is for caesar
_TO_CAESAR = re.compile(
    r"\b(?:your|answers?|repl(?:y|ies)|responses?|explanations?|code examples|examples)\b", re.I
)
_COUNTED_UNIT = re.compile(
    r"\d[\d,.]*\s*(?:metric|imperial|celsius|fahrenheit|kilomet(?:er|re)s?|miles?|kg|"
    r"kilograms?|pounds?|lbs)\b|\bper (?:kilogram|mile|pound)|\bmiles davis\b|"
    r"\b(?:metric|imperial|celsius|fahrenheit|miles|pounds)['’]",
    re.IGNORECASE,
)
# What sets up a role-play or a simulation: nothing the person says inside it is theirs
_ROLE_PLAY = re.compile(
    r"\b(?:act as|acting as|you are an? |pretend|role-?play|simulat\w+|the following is a "
    r"conversation|play the (?:role|part)|you will be|in character|stay in character|"
    r"i want you to (?:act|be|play|respond as))",
    re.IGNORECASE,
)
_AGREEMENT = re.compile(
    r"^(?:yeah|yes|yep|definitely|absolutely|agreed|i agree|exactly|true|"
    r"right|sounds good|that makes sense|good point)\b",
    re.IGNORECASE,
)


# a day or date in what a person prepares for: one event ("my interview next Wednesday", "the
# Easter Market on April 16th"); training for a race on a date is a goal all the same
_DATED = re.compile(
    r"\b(?:today|tonight|tomorrow|this (?:week|weekend|morning|afternoon|evening)|next "
    r"(?:week|weekend|month|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\d{1,2}(?:st|nd|rd|th)\b|"
    r"(?:january|february|march|april|may|june|july|august|september|october|november|"
    r"december) \d{1,2}\b)",
    re.IGNORECASE,
)


def _subordinate(sentence: str, start: int) -> bool:
    return _SUBORDINATE.search(sentence[:start]) is not None


def _leads(sentence: str, start: int) -> bool:
    """Whether "my …" at `start` opens its clause (is its subject)."""
    before = sentence[:start].rstrip().lower()
    return (
        before == ""
        or before.endswith((",", ";", ":", "-", "—"))
        or bool(re.search(r"\b(?:and|but|so|because|also|now|then|well|oh|plus|actually)$", before))
    )


def _echoes(text: str, assistant: str) -> bool:
    """Whether a statement mostly repeats what caesar just said ("Yeah, communication with my
    partner is key" after "Communicate with your partner")."""
    if not assistant:
        return False
    words = {w for w in re.findall(r"[a-z]{4,}", text.lower())}
    said = {w[:6] for w in re.findall(r"[a-z]{4,}", assistant.lower())}
    if not words:
        return False
    shared = sum(1 for w in words if w[:6] in said)
    share = shared / len(words)
    return share >= 0.6 and bool(_AGREEMENT.search(text))


def unsafe(text: str) -> bool:
    """An instruction that would take away caesar's own rules: never learned, whoever read it
    (the offline shapes or an LLM)."""
    return _UNSAFE.search(text) is not None


# "I'm vegetarian, so could you suggest a lunch?": a question whose first clause is the
# person saying how things are for them
_LEAD_CLAUSE = re.compile(
    r"^(?P<lead>(?:i|i'm|i’m|i am|i've|i’ve|i'd|i’d|we|we're|we’re|we've|we’ve|my|our)\b[^?,;]{4,}?)"
    r"(?:,|;|\s+[-—])\s+(?:so|and|but|which|what|how|any|is|are|do|does|can|could|would|should|"
    r"where|when|who|will|has|have|got|anything|ideas?|thoughts?|suggestions?|"
    r"recommendations?|tips?)\b",
    re.IGNORECASE,
)
# a named thing the person owns, said in passing ("a case for my iPhone 14?"), or a garden
_OWNS = re.compile(
    r"\b(?:my|our) (?:new |old |current |trusty |own |little |small )?(?:(?P<obj>"
    + _BRANDS
    + r")|(?P<place>garden|allotment|backyard|balcony|greenhouse|vegetable patch|veggie patch)\b)",
    re.IGNORECASE,
)


def statements_in(sentence: str) -> list[Statement]:
    """The standing statement one sentence of the person's makes, if any (see the module
    docstring): one a sentence, by the first shape that fits (`_SHAPES`' order). Its text is
    the whole sentence, so "My partner Alex and I adopted a cat called Miso" keeps both."""
    sentence = _OPENER.sub("", sentence.strip()).strip()
    if len(sentence) < 6 or _NOT_SAID.search(sentence):
        return []
    asks = sentence.endswith("?")
    instructs = re.search(r"\b(?:always|from now on|going forward|in future)\b", sentence, re.I)
    if asks and not instructs:
        return _in_question(sentence)
    found = _shaped(sentence, asks)
    return found or _owned(sentence)


def _shaped(sentence: str, asks: bool) -> list[Statement]:
    """The statement of the first shape in `_SHAPES` that fits the sentence."""
    for slot, pattern in _SHAPES:
        kind = _SLOT_KIND[slot]
        if asks and kind != kinds.INSTRUCTION:
            continue
        match = pattern.search(sentence)
        if match is None:
            continue
        obj = (match.groupdict().get("obj") or "").strip(" ,\"'“”")
        if obj.lower() in _PRONOUN_OBJECTS or (
            slot in ("likes", "dislikes") and obj.lower().split()[0] in _LIKED_NOTHING
        ):
            continue
        if re.search(r"\b(?:like|as if|as though)\s*$", sentence[: match.start()], re.I):
            continue  # "explain it like I'm a PhD student"
        if slot == "goal" and obj.lower().startswith("preparing for") and _DATED.search(obj):
            continue  # "preparing for the Easter Market on April 16th": one event
        if slot in ("likes", "dislikes") and (
            _REACTION.search(obj) or _subordinate(sentence, match.start())
        ):
            continue  # a reaction, or "see which one I like better"
        if re.search(r"\brather\b", match[0], re.I) and re.search(r"\b(?:it|them)\b", obj, re.I):
            continue  # "I'd rather not mail it out": about one thing, this once
        if slot == "family" and obj and not _leads(sentence, match.start()):
            continue  # "communication with my partner is key": not about the partner
        if slot == "work" and obj.lower().split()[-1:] and obj.lower().split()[-1] in _NOT_JOBS:
            continue
        if kind == kinds.INSTRUCTION:
            if _UNSAFE.search(sentence):
                return []  # never learned, and nothing else from the sentence either
            if slot == "units" and not re.search(
                r"\b(?:use|prefer|in|give|want|stick to|always|please)\b", sentence, re.I
            ):
                continue  # "I ran 5 miles" names a unit; it asks for none
            if slot == "units" and _COUNTED_UNIT.search(sentence):
                continue  # "I ran 5 miles", "Joules per kilogram": a unit used, none asked for
            addressed = slot == "length" and _TO_CAESAR.search(sentence) is not None
            if slot == "answers" and not _LASTING.search(sentence):
                continue  # "I want you to write a summary": for this turn
            if slot in ("answers", "language", "format", "length", "units") and (
                not (_STANDING.search(sentence) or addressed) or _OWN_PLAN.search(sentence)
            ):
                continue  # for this turn ("give it a heading", "answer in English")
        negated = bool(match.groupdict().get("neg")) or bool(
            re.search(
                r"\b(?:don'?t|don’t|do not|no longer|never|not|can'?t|can’t|cannot)\b",
                sentence[: match.end()],
                re.I,
            )
            and slot in ("diet", "drink")
        )
        if slot == "dislikes":
            negated = True
        return [
            Statement(
                kind,
                slot,
                _clip(sentence),
                about=_about(obj),
                polarity=-1 if negated else 1,
                change=bool(_CHANGE.search(sentence)),
            )
        ]
    return []


def _in_question(sentence: str) -> list[Statement]:
    """What a question says about the person: its first clause when that is a statement of
    theirs ("I'm coeliac, so is sourdough safe?"), else a named thing they own ("a case for my
    iPhone 14 Plus?", learned as "I have an iPhone 14 Plus."). Nothing else in a question is
    taken."""
    lead = _LEAD_CLAUSE.match(sentence)
    if lead is not None:
        found = statements_in(lead["lead"].rstrip() + ".")
        if found:
            return found
    return _owned(sentence)


# an email's footer the person pasted, not them ("Sent from my iPad")
_SIGNATURE = re.compile(r"\bsent from my\b", re.IGNORECASE)


def _owned(sentence: str) -> list[Statement]:
    """A named thing the person owns, or a garden of theirs, said in passing: learned in a
    sentence of its own ("I have an iPhone 13 Pro."), since the one it was said in is about
    something else."""
    owns = _OWNS.search(sentence)
    if owns is None or _subordinate(sentence, owns.start()) or _SIGNATURE.search(sentence):
        return []
    thing = (owns["obj"] or owns["place"]).strip()
    article = "an" if thing[0].lower() in "aeiou" or thing.lower().startswith("xbox") else "a"
    slot = "uses" if owns["obj"] else "home"
    return [Statement(_SLOT_KIND[slot], slot, f"I have {article} {thing}.", about=_about(thing))]


_ABBREVIATION = re.compile(
    r"\b(?:dr|mr|mrs|ms|prof|st|mt|jr|sr|e\.g|i\.e|vs|etc|approx|no)\.$", re.I
)


def sentences(text: str) -> list[str]:
    """`text` cut into sentences; "Dr. Okafor" and "e.g. this" are not cut."""
    out: list[str] = []
    for piece in _SENTENCES.split(text):
        if not piece or not piece.strip():
            continue
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {piece.strip()}"
        else:
            out.append(piece.strip())
    return out


def extract_statements(turns: Sequence[Mapping[str, object]]) -> list[Statement]:
    """The standing statements in the person's turns of a conversation, in order; one per
    sentence, at most MAX_PER_MESSAGE a message. A conversation that sets up a role-play or a
    simulation yields none: what the person says in it is a character's."""
    if any(t["role"] == "user" and _ROLE_PLAY.search(str(t["content"])) for t in turns):
        return []
    found: list[Statement] = []
    assistant = ""
    for turn in turns:
        content = str(turn["content"])
        if turn["role"] != "user":
            assistant = content
            continue
        if _verse(content):
            continue
        mine: list[Statement] = []
        for sentence in sentences(own_words(content)):
            mine.extend(s for s in statements_in(sentence) if not _echoes(s.text, assistant))
        found.extend(s for s in mine[:MAX_PER_MESSAGE] if s.text not in {f.text for f in found})
    return found


def _verse(message: str) -> bool:
    """Short lines with no sentence ends: lyrics or a poem the person pasted."""
    lines = [line for line in message.splitlines() if line.strip()]
    if len(lines) < 4:
        return False
    short = sum(1 for line in lines if len(line) < 60 and not line.rstrip().endswith((".", "?")))
    return short / len(lines) >= 0.75


def conflicts(new: Statement | tuple[str, str, int], old: Statement | tuple[str, str, int]) -> bool:
    """Whether two statements of one slot say opposite things: the same thing with the other
    polarity ("I love cilantro" / "I hate cilantro"), or a food a diet leaves out ("I eat fish"
    / "I'm vegetarian"). `(slot, about, polarity)` tuples or Statements."""
    n = (new.slot, new.about, new.polarity) if isinstance(new, Statement) else new
    o = (old.slot, old.about, old.polarity) if isinstance(old, Statement) else old
    like = {"likes", "dislikes"}
    same_slot = n[0] == o[0] or {n[0], o[0]} <= like
    if not same_slot:
        return False
    if n[1] == o[1] and n[2] != o[2]:
        return True
    if n[0] == "diet" and o[0] == "diet":
        return _diet_clash(n[1], n[2], o[1], o[2])
    return False


def _diet_clash(a: str, a_pol: int, b: str, b_pol: int) -> bool:
    """A diet and a food it leaves out, eaten: "vegetarian" (+) against "fish" (+)."""
    for diet, diet_pol, food, food_pol in ((a, a_pol, b, b_pol), (b, b_pol, a, a_pol)):
        key = diet.replace(" ", "-")
        excluded = DIET_EXCLUDES.get(key)
        if excluded is None or food_pol < 0 or diet_pol < 0:
            continue
        if food in excluded or food.rstrip("s") in excluded or food + "s" in excluded:
            return True
    return False

"""The regular expressions and word lists of the NER rules (:mod:`agtos.tasks.ner_rules`).

The strong rules' patterns (deadlines, dated events, projects, tools, person cues) serve with and
without the model; the organisation, place and sentence-opening person heuristics serve the
regex-only fallback.
"""

from __future__ import annotations

import re

from agtos.tasks.text import STOPWORDS

# --------------------------------------------------------------------------- rule building blocks

_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_MONTH_FULL = r"(?:january|february|march|april|june|july|august|september|october|november|december)"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
DATE_EXPR = (
    r"(?:"
    rf"(?:(?:this|next|coming|following)\s+)?{_WEEKDAY}(?:\s+(?:morning|afternoon|evening|night|noon))?"
    rf"|{_MONTH}\.?\s+{_DAY}(?:,?\s+\d{{4}})?"
    rf"|(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?"
    rf"|(?:the\s+)?end\s+of\s+(?:the\s+)?(?:day|week|month|quarter|year|{_MONTH_FULL})"
    r"|(?:this|next)\s+(?:week|month|quarter|year)"
    r"|today|tonight|tomorrow|eod|eow|eom"
    r"|q[1-4](?:\s+\d{4})?"
    rf"|{_MONTH_FULL}(?:\s+\d{{4}})?"
    r")(?!\w)"
)
_CAP = r"[A-Z](?:[\w&+#-]|\.(?=\w))*"  # a capitalised token; inner dots only (Node.js)
_CAPSEQ = rf"{_CAP}(?:\s+{_CAP}){{0,3}}"
_PERSON = r"[A-Z][a-z]+(?:-[A-Z]?[a-z]+)?(?:\s+[A-Z][a-z]+(?:-[A-Z]?[a-z]+)?)?"
_KIN = (
    r"friends?(?:\s+(?:of|with))?|colleagues?(?:\s+(?:of|with))?|co-?workers?|boss|manager|wife|"
    r"husband|partner|girlfriend|boyfriend|fianc[eé]e?|sister|brother|mother|mom|mum|father|dad|son|"
    r"daughter|cousin|aunt|uncle|niece|nephew|neighbou?r|teammate|mentor|roommate|flatmate|classmate|"
    r"grandma|grandpa|grandmother|grandfather|physio|physiotherapist|therapist|doctor|dentist|tutor|teacher|"
    r"coach|trainer|landlord|landlady|assistant|spouse|stepson|stepdaughter"
)
KIN_WORD = re.compile(rf"(?i:{_KIN}|mom|mum|dad|mommy|daddy|grandma|grandpa|nana|granny)")
_TITLE = r"(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?"

DUE_RE = re.compile(rf"\bdue\s+(?:date\s+)?(?:is\s+)?(?:on\s+|by\s+|before\s+)?(?P<date>{DATE_EXPR})", re.I)
DEADLINE_RE = re.compile(
    rf"\bdeadlines?\b(?:[^.;!?\n]{{0,50}}?\b(?:is|was|on|by|of|for|:))?\s*(?:on\s+|by\s+)?(?P<date>{DATE_EXPR})",
    re.I,
)
SHIP_RE = re.compile(
    r"\b(?:ships?|shipping|launch(?:es|ing)?|goes\s+live|go\s+live|releases?|releasing|lands?)\s+"
    rf"(?:on\s+|by\s+)?(?P<date>{DATE_EXPR})",
    re.I,
)
BY_RE = re.compile(rf"\b(?:by|before|until|no\s+later\s+than)\s+(?:the\s+)?(?P<date>{DATE_EXPR})", re.I)
_EVENT_NOUNS = (
    r"launch|release|demo|kick-?off|go-live|presentation|review|meeting|conference|interview|wedding|"
    r"appointment|offsite|workshop|hackathon|exam|party|trip|flight|ceremony|recital|match"
)
EVENT_RE = re.compile(
    rf"\b(?:the\s+|our\s+|my\s+|their\s+|her\s+|his\s+|your\s+)?"
    rf"(?P<event>(?-i:{_CAP}\s+)?(?:{_EVENT_NOUNS}))\s+(?:is\s+|was\s+|will\s+be\s+)?"
    rf"(?:on|scheduled\s+for|set\s+for|planned\s+for|happening\s+on|takes\s+place\s+on)\s+(?:the\s+)?"
    rf"(?P<date>{DATE_EXPR})",
    re.I,
)
PROJECT_RES = (
    re.compile(rf"\b[Pp]roject\s+(?:(?:called|named|codenamed)\s+)?(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})"),
    re.compile(rf"(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})\s+[Pp]roject\b"),
)
NOT_PROJECT_NAMES = frozenset(
    "manager management lead leader plan planning team owner board meeting update status deadline "
    "side pet new big main next last first final every each another any some which what".split()
)
LEADING_NOISE = frozenset(
    {"the", "a", "an", "my", "our", "your", "her", "his", "their", "this", "that"}
    | {"hi", "hey", "hello", "yo", "dear", "thanks", "congrats", "dr", "dr.", "mr", "mr.", "mrs", "mrs.", "ms", "ms."}
)

_TOOL_LEXICON = frozenset(
    """python javascript typescript java kotlin scala golang c++ c# php perl haskell elixir erlang
    clojure lua matlab fortran cobol sql bash powershell html css docker kubernetes k8s git github
    gitlab bitbucket jira confluence trello asana figma photoshop illustrator blender unity
    postgres postgresql mysql sqlite mongodb redis elasticsearch kafka rabbitmq airflow dbt snowflake
    bigquery databricks tableau looker react angular vue svelte django fastapi pandas numpy pytorch
    tensorflow scikit-learn jupyter vscode neovim vim emacs intellij pycharm xcode terraform ansible
    jenkins circleci nginx apache aws gcp azure heroku vercel netlify linux ubuntu debian windows macos
    android ios chatgpt copilot postman obsidian evernote dropbox whatsapp telegram discord webpack
    graphql node.js nodejs next.js rails laravel spring kubectl helm grafana prometheus splunk
    salesforce hubspot zapier airtable""".split()
)
_TOOL_PHRASES = (
    "react native",
    "vs code",
    "visual studio code",
    "visual studio",
    "google sheets",
    "google docs",
    "microsoft teams",
    "power bi",
    "google cloud",
    "ruby on rails",
    "jetbrains rider",
)
_TOOL_NEEDS_CAPITAL = frozenset(
    "go rust swift spark word teams excel notion slack zoom linear julia ruby dart elm flask chef sketch "
    "puppet keras outlook pages numbers keynote r".split()
)
TOOL_LEXICON_RE = re.compile(
    r"(?<![\w.])(?:"
    + "|".join(re.escape(t) for t in sorted((*_TOOL_LEXICON, *_TOOL_PHRASES), key=len, reverse=True))
    + r")(?![\w+#])|(?<![\w.])(?-i:"
    + "|".join(t.capitalize() for t in sorted(_TOOL_NEEDS_CAPITAL, key=len, reverse=True))
    + r")(?![\w+#])",
    re.I,
)
TOOL_CONTEXT_RE = re.compile(
    r"\b(?i:using|use|uses|used|built\s+(?:with|on|in)|written\s+in|coded\s+in|programmed\s+in|"
    r"switched\s+to|migrated\s+to|deployed\s+(?:on|to)|runs\s+on|running\s+on|installed|installing)\s+"
    rf"(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})"
)
TECH_CONTEXT_RE = re.compile(rf"\b(?i:in|with|on|via)\s+(?P<name>{_CAP})")
TECH_SHAPE = re.compile(r"^[A-Z]?[a-z]+[A-Z]\w*$|\d|\.(?:js|py|net)$|[+#]")

PERSON_CUE_RES = (
    re.compile(rf"\b(?i:{_KIN})(?:,\s+|\s+(?i:is\s+)?(?i:called|named)\s+|\s+){_TITLE}(?P<name>{_PERSON})"),
    re.compile(rf"(?P<name>{_PERSON})(?:'s|’s)\s+(?:(?i:best|good|old|close|new|little|big)\s+)?(?i:{_KIN})\b"),
)
SOFT_PERSON_RES = (
    re.compile(
        r"\b(?i:met|meet|meeting|talked\s+(?:to|with)|spoke\s+(?:to|with)|chatted\s+with|texted|emailed|"
        r"married|dating|works?\s+with|working\s+with|worked\s+with|hanging\s+out\s+with|hung\s+out\s+with)"
        rf"\s+(?:with\s+)?(?P<name>{_PERSON})"
    ),
    re.compile(
        rf"(?P<name>{_PERSON})(?:'s|’s)\s+(?i:project|team|idea|birthday|kids?|children|house|car|startup|company|business)\b"
    ),
)

#: the speaker of an agent chat, as facts name them ("User moved...", "the user's wife")
USER_RE = re.compile(r"(?<![\w'])(?:(?-i:User)|(?<=the )user|(?<=The )user)(?=(?:'s|’s)?\b)(?![\w-]|:)")
#: a speaker's "Name: " at the start of a line or after a sentence (summary lines)
SPEAKER_PREFIX_RE = re.compile(rf"(?:^|(?<=[.!?\"')]\s))(?P<name>{_PERSON}):\s")
_PETS = (
    r"dogs?|puppy|puppies|cats?|kittens?|kitty|parrots?|rabbits?|bunny|hamsters?|horses?|pony|ponies|"
    r"guinea\s+pigs?|turtles?|tortoises?|budgie|ferrets?|goldfish|beagles?|labradors?|retrievers?|"
    r"poodles?|terriers?|huskies|husky|corgis?|dachshunds?|spaniels?|bulldogs?|collies?|shepherds?"
)
#: "our dog Pixel", "a cat named Miso", "my beagle, Biscuit"
PET_RE = re.compile(rf"\b(?i:{_PETS})(?:,\s+|\s+(?i:called|named)\s+|\s+)(?P<name>{_PERSON})\b")
#: workplaces: "a new job at Feedzai", "works for Accenture", "teaches chemistry at the Lycée"
ORG_STRONG_RE = re.compile(
    r"\b(?i:(?:works?|working|worked|interns?|interning|volunteer(?:s|ing|ed)?|employed|hired|teach(?:es)?|"
    r"teaching|taught)(?:\s+\w+)?\s+(?:at|for|by)|job\s+(?:at|with)|position\s+at|role\s+at|"
    r"(?:company|employer|startup|bakery|restaurant|band|firm|shop|caf[eé]|studio|agency|club|team)"
    r",?\s+(?:called|named))\s+(?i:the\s+)?"
    rf"(?P<name>{_CAP}(?:\s+(?:(?:&|de|da|do|of|la|le|del|di|van|von)\s+)?{_CAP}){{0,4}})"
)
#: possessions: "my old Vespa", "my current MacBook Air" (a capitalised name after my/our/their/'s)
PRODUCT_RE = re.compile(
    r"\b(?i:my|our|his|her|their|(?<=')s|(?<=’)s)\s+(?:(?i:old|new|current|first|trusty|beloved|little|"
    rf"vintage|brand-new)\s+)*(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})(?=\s+(?i:from|is|was|that|which|and|"
    r"to|for|with|in)\b|[.,;!?]|$)"
)

# fallback-only heuristics
ORG_SUFFIX_RE = re.compile(
    rf"\b(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}}\s+(?:Corp(?:oration)?|Inc|Ltd|LLC|GmbH|AG|PLC|plc|Co|Company|"
    r"Group|Labs?|Technologies|Systems|Bank|University|Institute|Foundation|Agency|Studios?|Ventures|"
    r"Partners|Holdings|Solutions|Software))\b"
    rf"|\b(?P<name2>(?:University|Institute|Bank)\s+of\s+{_CAP}(?:\s+{_CAP})?)"
)
ORG_CONTEXT_RE = re.compile(
    r"\b(?i:works?\s+(?:at|for)|working\s+(?:at|for)|worked\s+(?:at|for)|employed\s+(?:by|at)|joined|"
    r"job\s+at|interns?\s+at|hired\s+by)\s+(?:the\s+)?"
    rf"(?P<name>{_CAPSEQ})"
)
PLACE_CONTEXT_RE = re.compile(
    r"\b(?i:lives?|living|lived|resides?|residing|moved|relocated|based|located|headquartered|born|"
    r"grew\s+up|stays?|staying|travell?ing|flying|flew|trip)\s+(?i:in|to|at|near)\s+(?:the\s+)?"
    rf"(?P<name>{_CAPSEQ})"
)
PLACE_FROM_RE = re.compile(rf"\b(?i:is|am|are|comes?|came)\s+from\s+(?P<name>{_CAPSEQ})")
PLACE_IN_RE = re.compile(rf"\b(?i:in|near|to)\s+(?:the\s+)?(?P<name>{_CAPSEQ})")
PERSON_START_RE = re.compile(
    rf"(?P<name>{_PERSON})(?=\s+(?i:works?|worked|working|lives?|lived|is|was|has|had|joined|met|knows|"
    r"said|says|told|moved|owns|leads|manages|likes|loves|wants|will|and|from|at|runs|started)\b)"
)
NOT_NAMES = frozenset(
    {
        *STOPWORDS,
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "yesterday",
        "tonight",
        "project",
        "deadline",
    }
)

# --------------------------------------------------------------------------- events, products, orgs, places by context

_NAME_SEQ = rf"{_CAP}(?:\s+(?:of\s+|de\s+|the\s+)?{_CAP}){{0,3}}"
#: a capitalised name whose last word says it is an event: "the Berlin Marathon", "Web Summit", "World Cup"
NAMED_EVENT_RE = re.compile(
    rf"(?P<name>(?:{_CAP}\s+){{1,3}}(?:Half\s+)?(?:Marathon|Festival|Fest|Conference|Summit|Expo|Convention|"
    r"Championships?|Cup|Olympics|Paralympics|Tournament|Open|Gala|Fair|Carnival|Parade|Week|Biennale|Jubilee|"
    r"Grand\s+Prix|Triathlon|Ironman|Hackathon|Meetup|Awards)|(?-i:[A-Z][A-Za-z]+Con))(?![\w-])"
)
#: a name before an event noun: "the ROSCon conference", "the Primavera festival", "the JLPT N3 exam"
EVENT_HEAD_RE = re.compile(
    rf"(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})\s+(?i:conference|festival|summit|expo|convention|tournament|"
    r"hackathon|marathon|half\s+marathon|triathlon|meetup|gala|exam|exams|certification)\b"
)
#: an exam's acronym after taking / passing / studying for it: "pass the GRE", "studying for the IELTS"
EXAM_RE = re.compile(
    r"\b(?i:pass|passed|passing|sit|sitting|sat|study(?:ing)?\s+for|studied\s+for|"
    r"prep(?:are|aring|ping)?\s+for|registered\s+for|signed\s+up\s+for|retake|retaking|failed)\s+(?i:the\s+|my\s+)?"
    r"(?P<name>[A-Z]{2,}[A-Z0-9-]*(?:\s+(?:[A-Z]+\d+|\d+|[A-Z]\d*)\b)?)"
)
_HOLIDAYS = (
    r"Christmas(?:\s+Eve|\s+Day)?|Easter(?:\s+Sunday|\s+Monday)?|Thanksgiving|Halloween|Hanukkah|Chanukah|Diwali|"
    r"Ramadan|Eid(?:\s+al-\w+)?|Passover|Yom\s+Kippur|Rosh\s+Hashanah|Lunar\s+New\s+Year|Chinese\s+New\s+Year|"
    r"New\s+Year(?:'s|’s)\s+(?:Eve|Day)|Boxing\s+Day|Mardi\s+Gras|Oktoberfest|Carnival|Pentecost|Holi|Hogmanay"
)
#: holidays and named days: "Christmas", "Valentine's Day", "Mother's Day", "Independence Day"
HOLIDAY_RE = re.compile(
    rf"(?<![\w-])(?P<name>(?:St\.?\s+)?(?:{_HOLIDAYS})|(?:St\.?\s+)?[A-Z][a-z]+(?:'s|’s|s’)?(?:\s+[A-Z][a-z]+)?\s+Day)(?![\w-])"
)
_LANGUAGES = (
    r"English|Spanish|French|German|Italian|Portuguese|Japanese|Chinese|Mandarin|Cantonese|Korean|Arabic|Russian|"
    r"Hindi|Dutch|Swedish|Norwegian|Danish|Finnish|Polish|Greek|Turkish|Hebrew|Thai|Vietnamese|Indonesian|Swahili|"
    r"Latin|Czech|Hungarian|Romanian|Ukrainian|Catalan|Basque|Irish|Welsh|Bengali|Urdu|Persian|Farsi|Tagalog|"
    r"Icelandic|Croatian|Serbian|Malay|Punjabi|Tamil|Esperanto|Yiddish|Gaelic"
)
#: a language someone learns, studies or speaks ("learning Japanese", "fluent in Danish")
LANGUAGE_RE = re.compile(
    r"\b(?i:learn|learns|learning|learned|learnt|study|studies|studying|studied|speak|speaks|speaking|spoke|"
    r"practi[cs]e|practi[cs]es|practi[cs]ing|practi[cs]ed|fluent\s+in|conversational|improve\s+my|improving\s+my|"
    r"brush\s+up\s+on|brushing\s+up\s+on|native|teach|teaches|teaching|taught)\s+(?:(?i:my|some|more|basic)\s+)?"
    rf"(?P<name>{_LANGUAGES})\b(?!\s+(?i:food|cuisine|restaurant|people|friends?|guy|girl|man|woman|wine|beer))"
)
_BRANDS = (
    r"Apple|Google|Microsoft|Amazon|Samsung|Sony|Nintendo|Canon|Nikon|Fujifilm|Leica|Adobe|Tesla|Garmin|Fitbit|"
    r"Dell|Lenovo|Asus|Acer|HP|Bose|Sonos|Xbox|PlayStation|DJI|GoPro|Peloton|Dyson|Kindle|Meta|Oculus|Huawei|"
    r"Xiaomi|OnePlus|Nokia|Motorola|Logitech|Razer|Nvidia|NVIDIA|AMD|Intel|Philips|Roomba|Vitamix|KitchenAid|"
    r"Nespresso|Toyota|Honda|Ford|BMW|Audi|Volkswagen|VW|Vespa|Yamaha|Fender|Gibson|Roland|Korg|Casio"
)
_SUFFIX = r"(?:Pro|Max|Plus|Ultra|Mini|mini|Air|SE|Lite|Neo|XL)"
_MODEL_CODE = r"(?:[A-Z]{0,3}\d{1,4}[A-Za-z]{0,2}|[A-Z]{1,2}\d*)"
#: a brand with its product: "Google Maps", "Apple Watch", "Sony A7 IV", "Adobe Premiere Pro"
BRAND_PRODUCT_RE = re.compile(rf"(?<![\w.])(?P<name>(?:{_BRANDS})(?:\s+(?:{_CAP}|\d{{1,4}}[a-z]?)){{1,3}})(?![\w-])")
#: product shapes: camel-case names ("MacBook Pro", "iPhone 15", "DaVinci Resolve"), a model code with a
#: suffix ("M3 Pro") or a name with a model number ("Pixel 8", "Galaxy S24 Ultra")
PRODUCT_SHAPE_RE = re.compile(
    r"(?<![\w.'’-])(?P<name>"
    rf"(?:i[A-Z][a-z]+|(?:[A-Z][a-z]+){{1,2}}[A-Z][a-z]+\w*)(?:\s+(?:{_SUFFIX}|\d{{1,4}}[a-z]?|{_CAP}))*"
    rf"|{_MODEL_CODE}\s+{_SUFFIX}"
    rf"|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?\s+[A-Z]{{0,2}}\d{{1,4}}[a-z]?(?:\s+{_SUFFIX})?"
    r")(?![\w-])"
)
#: words before a number that are no product ("Chapter 3", "Room 101", "Level 2")
NOT_PRODUCT_HEADS = frozenset(
    "chapter room level day week year section page grade gate terminal platform route floor unit apt step part "
    "season episode round lap stage class table zone phase number no version v team group block building suite "
    "flight bus train line exit act scene book volume vol figure fig lesson module q1 q2 q3 q4 top under over "
    "highway interstate apartment house".split()
)
#: camel-case first names and surnames ("McDonald", "DeShawn", "LeBron"): no product without product context
NAME_CAMEL = re.compile(r"^(?:Mc|Mac|De|Di|Da|Du|Le|La|Van|Von|O)[A-Z]")
PRODUCT_CONTEXT = re.compile(
    r"(?i:\b(?:my|our|new|old|a|an|the|using|use|uses|used|in|with|on|bought|buy|buying|got|get|getting|ordered|"
    r"upgraded\s+to|switched\s+to|edit(?:s|ing)?\s+in)\s+)$"
)
#: an employer after a job title: "a data engineer at Feedzai", "works as a nurse for the NHS"
ROLE_AT_RE = re.compile(
    r"\b(?i:engineer|developer|designer|consultant|analyst|manager|nurse|teacher|professor|lecturer|researcher|"
    r"scientist|intern|accountant|lawyer|attorney|architect|editor|writer|journalist|chef|cook|barista|cashier|"
    r"director|officer|specialist|associate|student|doctor|physician|surgeon|pharmacist|technician|programmer|"
    r"recruiter|paralegal|receptionist|clerk|waiter|waitress|bartender|librarian|therapist|counsel+or|"
    r"coordinator|administrator|advisor|adviser|banker|trader|planner|strategist|economist|statistician|"
    r"mechanic|electrician|pilot|postdoc|fellow|resident|cto|ceo|cfo|coo|vp|founder|co-founder|cofounder|"
    r"partner|employee|staffer|volunteer)s?\s+(?i:at|for|with)\s+(?i:the\s+)?"
    rf"(?P<name>{_CAP}(?:\s+(?:(?:&|de|da|do|of|la|le|del|di|van|von)\s+)?{_CAP}){{0,3}})"
    r"(?!\s+(?i:office|branch|site|campus|location|plant|headquarters|hq|store)\b)"
)
#: venues of a meal or a booking are businesses: "dinner at Nobu", "a table at the Ivy"
VENUE_RE = re.compile(
    r"\b(?i:dinner|lunch|brunch|breakfast|drinks|coffee|table|reservation|booking|booked|book|eat|ate|eating|"
    r"dine|dined|dining|meal|date\s+night|tasting\s+menu)\s+(?i:at)\s+(?i:the\s+)?"
    rf"(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})(?!['’]s)\b"
)
#: sports teams: "the Celtics game", "a fan of the Yankees", "rooting for the Lakers"
TEAM_RE = re.compile(
    rf"\b(?i:the)\s+(?P<name>(?:{_CAP}\s+)?[A-Z][a-z]+s)\s+(?i:game|games|match|matches|season|playoffs?|fans?)\b"
    r"|\b(?i:fan\s+of|rooting\s+for|root\s+for|cheer(?:ing)?\s+(?:for|on)|supporter\s+of)\s+(?i:the)\s+"
    rf"(?P<name2>(?:{_CAP}\s+)?[A-Z][a-z]+s)\b"
)
#: where someone goes or stays: "hiking in the Dolomites", "a week in Crete", "skiing at Zermatt"
PLACE_ACTIVITY_RE = re.compile(
    r"\b(?i:hiking|hike|hiked|skiing|ski|skied|climbing|climbed|trekking|camping|camped|walking|cycling|biking|"
    r"surfing|diving|sailing|holiday|holidays|vacation|honeymoon|trip|road\s+trip|"
    r"backpacking|stayed|staying|visit|touring|toured|exploring|explored)\s+"
    r"(?i:in|at|around|across|through|to)\s+(?i:the\s+)?"
    rf"(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})"
)
#: words before a model PERSON that make it a place: "in Valencia", "moved to Porto", "visited Kyoto"
PLACE_BEFORE = re.compile(
    r"(?i:\b(?:in|near|around|across|outside|visit|visited|visiting|(?:moved?|moving|relocat\w+|flew|fly|flying|"
    r"drove|drive|driving|travel+(?:ed|ing)?|trips?|going|go|went|headed|heading|returned|returning|"
    r"road\s+trip)\s+to|(?:am|is|are|was|were|come|comes|came|originally)\s+from|based\s+in|born\s+in)\s+(?:the\s+)?)$"
)

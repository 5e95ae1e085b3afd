"""Build ``benchmarks/eval/devset.json``: the long-memory development set (deterministic).

    .venv/bin/python -m benchmarks.eval.make_devset [--out PATH] [--check]

Fourteen personas, each a multi-session history of hand-written conversations, plus
distractor sessions drawn (seeded) from a shared pool: ordinary multi-turn chats on other
subjects, greetings and one-line lookups (which the save heuristics are expected to skip).
Questions reference sessions by key; keys become ``hNN_sMM`` ids numbered by date.

Question types follow LongMemEval (``single-session-user``, ``single-session-assistant``,
``single-session-preference``, ``multi-session``, ``knowledge-update``, ``temporal-reasoning``)
plus ``single-session-paraphrase``: the answer lives in one session but the question shares
few words with it. Knowledge updates name the superseded session(s). Turns holding
evidence carry ``has_answer: true``.

``--check`` only verifies that the committed JSON is what this script generates.
"""

# ruff: noqa: E501 - the conversations are prose, one turn per line

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

SEED = 20240501
DEFAULT_OUT = Path(__file__).with_name("devset.json")
DATE_FMT = "%Y/%m/%d (%a) %H:%M"  # LongMemEval's date format
DISTRACTORS_PER_HAYSTACK = 16

SU, SA, SP = "single-session-user", "single-session-assistant", "single-session-preference"
PARA, MULTI, KU, TEMP = "single-session-paraphrase", "multi-session", "knowledge-update", "temporal-reasoning"

# A session is written as a transcript, one turn per line: "u: text" (user) or "a: text"
# (assistant); a "*" after the role ("u*:", "a*:") marks a turn holding evidence.
Turn = tuple[str, str]


def transcript(text: str) -> list[Turn]:
    turns: list[Turn] = []
    for line in text.strip().splitlines():
        role, sep, content = line.strip().partition(": ")
        if not sep or role.rstrip("*") not in ("u", "a"):
            raise ValueError(f"bad transcript line: {line!r}")
        turns.append((role, content.strip()))
    return turns


def _sessions(*texts: str) -> list[list[Turn]]:
    return [transcript(t) for t in texts]


@dataclass(frozen=True)
class Q:
    type: str
    question: str
    answer: str
    gold: tuple[str, ...]  # session keys holding the answer
    superseded: tuple[str, ...] = ()  # knowledge updates: the sessions the gold ones replace


@dataclass
class Persona:
    hid: str
    start: str  # ISO date of day 0
    sessions: dict[str, tuple[int, str, str]]  # key -> (day offset, "HH:MM", transcript)
    questions: list[Q]


# ---------------------------------------------------------------------------------------
PERSONAS: list[Persona] = [
    Persona(
        "h01",
        "2024-01-08",
        {
            "lisbon": (
                0,
                "19:12",
                """
                u: My flat gets really damp in winter and there's black mould creeping along the bedroom ceiling. Any idea what I can do?
                a: Mould usually means moisture is condensing on cold surfaces. Ventilate every day, keep furniture a few centimetres away from outside walls and run a dehumidifier in the bedroom.
                u*: It's an old building in Alfama, here in Lisbon, so the walls are stone and there's no central heating at all.
                a*: In an unheated stone building a desiccant dehumidifier is the better choice: compressor models lose most of their efficiency below about 15 °C, while desiccant units keep working in a cold room.
                u: Okay, desiccant it is. Would 10 litres a day be enough for one bedroom?
                a: For a single bedroom a 7 to 10 litre unit is plenty. Empty the tank daily for the first week and wipe the mould off with diluted white vinegar.
            """,
            ),
            "dog": (
                12,
                "18:40",
                """
                u*: We adopted a rescue beagle on Saturday! His name is Biscuit and he's about two years old.
                a: Congratulations! How is he settling in?
                u*: He's sweet but he howls whenever we leave the flat, even for five minutes. The neighbours have started complaining.
                a: That's common with rescue dogs. Practise very short departures, give him a stuffed Kong when you leave, and make the crate a comfortable den rather than a punishment.
                u: Should the crate be in the bedroom or the living room?
                a: Start in the bedroom so he can hear you at night, then move it gradually once he's calmer.
            """,
            ),
            "tutor": (
                33,
                "20:05",
                """
                u: Can you give me some ideas to practise Portuguese outside of my lessons?
                a: Sure! What level are you at, and how are you learning at the moment?
                u*: Roughly A2. I have a tutor, Inês, who comes on Tuesday and Thursday evenings, but I freeze whenever I have to speak at the market.
                a: Try shadowing short podcast clips, narrate what you're doing while you cook, and prepare three market phrases before each visit. You could also ask Inês to role-play the market with you.
                u: Role-play is a good idea, I'll ask her on Tuesday.
            """,
            ),
            "porto": (
                67,
                "09:30",
                """
                u*: Big news: we've moved from Lisbon to Porto! We got the keys to a flat in Bonfim last week.
                a: Congratulations on the move! How are you finding Porto so far?
                u*: Loving it, but I need to find a new vet for Biscuit, his booster vaccinations are due next month.
                a: Ask neighbours with dogs or check reviews for clinics in Bonfim and Campanhã. Bring his vaccination booklet from the Lisbon vet so the new clinic has his history.
                u: Good point, I'll get the records transferred.
            """,
            ),
            "job": (
                85,
                "13:15",
                """
                u*: I accepted an offer from Ledgerly, a fintech here in Porto. I start on the 6th of May as a backend engineer.
                a: Congratulations! Is there anything you still want to negotiate before you sign?
                u: I'd like to work from home on Fridays. How do I bring that up without sounding demanding?
                a: Frame it around output: say you do your deepest focus work at home, propose a three-month trial, and ask how the team usually handles remote days.
            """,
            ),
            "wedding": (
                133,
                "21:00",
                """
                u: My sister Clara is getting married in Sintra on the 15th of June and I'm giving a speech. Can you help me structure it?
                a: Of course. A good structure is a short welcome, a story that shows who Clara is, how she and her partner fit together, and a toast. Aim for three to four minutes.
                u: Her fiancé is called Rui. They met climbing, funnily enough.
                a: That's a lovely thread to use, something like: Clara has always aimed high, and on a climbing wall she found someone willing to hold the rope.
            """,
            ),
        },
        [
            Q(KU, "Which city do I live in these days?", "Porto (moved from Lisbon in March)", ("porto",), ("lisbon",)),
            Q(SU, "What is my dog called?", "Biscuit, a rescue beagle", ("dog",)),
            Q(
                PARA,
                "Who helps me with the language I'm trying to pick up, and on which evenings?",
                "Inês, on Tuesday and Thursday evenings",
                ("tutor",),
            ),
            Q(
                SA,
                "What kind of dehumidifier did you recommend for my old bedroom?",
                "A desiccant dehumidifier (works in cold, unheated rooms)",
                ("lisbon",),
            ),
            Q(
                TEMP,
                "How long after we adopted our dog did we move to a new city?",
                "About eight weeks (mid-January to mid-March)",
                ("dog", "porto"),
            ),
            Q(
                MULTI,
                "What have I told you about my dog's behaviour and his health needs?",
                "He howls when left alone; his booster vaccinations are due and he needs a new vet in Porto",
                ("dog", "porto"),
            ),
            Q(SU, "When do I start at my new job, and what's the company called?", "6 May, at Ledgerly", ("job",)),
        ],
    ),
    Persona(
        "h02",
        "2024-02-05",
        {
            "berlin": (
                0,
                "07:20",
                """
                u*: I've signed up for the Berlin Marathon in September and I want to break 3:30. Can you help me build a plan?
                a: Sure. How much are you running now, and how many days a week can you train?
                u: About 50 km a week over five days. My longest run lately is 24 km.
                a: That's a solid base. I'd use an 18-week block: a long run building to 32-35 km, one tempo session at marathon pace (about 4:58 per km), one interval session and easy mileage otherwise.
                u: Great, let's put the long runs on Sundays.
            """,
            ),
            "knee": (
                24,
                "12:45",
                """
                u: The outside of my right knee has been hurting on runs longer than 15 km.
                a: Sorry to hear that. Have you had it looked at?
                u*: Yes, I saw a physio, Dr. Okafor, yesterday. She said it's iliotibial band syndrome and told me to cut my mileage in half for three weeks.
                a: That's a sensible plan. Add hip strengthening (clamshells, side planks, single-leg squats) and foam-roll the outer thigh, not the knee itself.
                u: Should I still do the Sunday long run?
                a: Replace it with an easy hour on the bike until your pain-free distance is back above 15 km.
            """,
            ),
            "rain": (
                40,
                "18:05",
                """
                u*: Honestly I hate treadmills. I'd rather run outside in a downpour than spend an hour on a belt.
                a: Plenty of runners feel the same! Do you have decent wet-weather kit?
                u: Not really, my jacket soaks through in ten minutes. What should I look for?
                a: A lightweight packable shell with taped seams, a cap with a brim to keep water off your glasses, and merino socks so wet feet don't blister.
            """,
            ),
            "valencia": (
                75,
                "20:30",
                """
                u*: Change of plans: I've pulled out of Berlin because the knee isn't ready. I'm now registered for the Valencia Marathon on the 1st of December instead.
                a: That's a wise call. Valencia is flat and fast, and the extra ten weeks give your knee time. Shall I rebuild the plan?
                u: Yes please, still aiming for sub-3:30 if the knee holds up.
                a: Let's restart the 18-week block in early August, with the first four weeks capped at 45 km and no intervals until you've done three pain-free long runs.
            """,
            ),
            "gels": (
                96,
                "10:10",
                """
                u: On my long runs I'm getting stomach cramps after the second gel.
                a: Which gels are you using, and are you drinking water with them?
                u*: The caffeinated ones from the running shop. I've noticed caffeine gels wreck my stomach, but the Maurten 100 ones are fine for me.
                a: Then stick with Maurten 100 and practise with them on every long run: one every 35 to 40 minutes with a few sips of water.
            """,
            ),
            "watch": (
                118,
                "19:40",
                """
                u: I bought a Garmin Forerunner 265. How should I set up my heart rate zones?
                a*: Skip the default age-based formula. Do a 30-minute solo time trial, take your average heart rate over the last 20 minutes as your lactate threshold, and in Garmin Connect base the zones on %LTHR instead of %max HR.
                u: My last threshold test put me at 171 bpm.
                a: Then easy runs should stay below about 150 bpm and tempo runs around 162 to 170 bpm.
            """,
            ),
        },
        [
            Q(
                KU,
                "Which marathon am I training for now?",
                "Valencia, on 1 December (switched from Berlin)",
                ("valencia",),
                ("berlin",),
            ),
            Q(SU, "What did the physio say was wrong with my knee?", "Iliotibial (IT) band syndrome", ("knee",)),
            Q(
                SP,
                "It's supposed to pour all week. How should I get my training runs in?",
                "Run outside with proper rain kit; the user hates treadmills",
                ("rain",),
            ),
            Q(
                SA,
                "How did you tell me to work out the heart rate zones for my new watch?",
                "30-minute time trial, average HR of the last 20 min as lactate threshold, zones by %LTHR",
                ("watch",),
            ),
            Q(
                PARA,
                "Which fuel during long efforts agrees with my digestion?",
                "Maurten 100 gels (caffeinated gels upset the stomach)",
                ("gels",),
            ),
            Q(
                MULTI,
                "What running equipment have I bought or been advised to get?",
                "A Garmin Forerunner 265; a taped-seam rain shell, brimmed cap and merino socks",
                ("rain", "watch"),
            ),
            Q(
                TEMP,
                "How many weeks after seeing the physio did I switch races?",
                "About seven weeks",
                ("knee", "valencia"),
            ),
        ],
    ),
    Persona(
        "h03",
        "2024-01-15",
        {
            "quotes": (
                0,
                "21:10",
                """
                u*: We've finally picked a builder for the kitchen: Hartley & Sons. The budget is £18,000 including the units.
                a: Exciting! Have you agreed a payment schedule and a start date?
                u: They want 30% up front and can start on the 4th of March.
                a: 30% is on the high side. Try to agree staged payments tied to milestones (strip-out, first fix, units fitted, completion) and get the schedule written into the contract.
            """,
            ),
            "sleep": (
                10,
                "03:05",
                """
                u: Anika is four months old and suddenly she's waking every two hours at night. I'm exhausted.
                a*: That sounds like the four-month sleep regression. A short, consistent bedtime routine helps: bath, feed, song, then into the cot drowsy but awake. Keep night feeds dark and quiet.
                u: Should I stop feeding her to sleep?
                a*: Gradually. Move the feed earlier in the routine so she learns to fall asleep without it, and expect a rough week before it gets better.
            """,
            ),
            "fired": (
                52,
                "17:30",
                """
                u*: We had to let Hartley & Sons go. They kept not turning up and the kitchen sat half-stripped for two weeks. Brightwork Builders are taking over the job from Monday.
                a: That's stressful, sorry. Document what Hartley completed and what you paid, so you can settle the account fairly.
                u: We paid them £5,400 so far. Brightwork says they can finish in six weeks.
                a: Get Brightwork's quote itemised against the remaining work so nothing Hartley already did is charged twice.
            """,
            ),
            "worktop": (
                66,
                "20:15",
                """
                u: We need to choose worktops. Quartz or granite?
                a: Both are durable. Quartz is non-porous and low-maintenance; granite is natural and more heat-resistant but needs sealing.
                u*: I think quartz. And I definitely prefer matte finishes, glossy surfaces show every fingerprint.
                a: A honed or matte quartz in a warm grey would suit white units. Pair it with brushed brass or matte black handles.
            """,
            ),
            "daycare": (
                80,
                "08:50",
                """
                u*: Anika started at Little Acorns nursery this week, three days a week. She cries every morning at drop-off.
                a: That's very normal in the first few weeks. Keep the goodbye short, cheerful and the same every time.
                u: The staff say she settles within ten minutes, which helps.
                a: That's a good sign. A comfort object from home, like a muslin that smells of you, can help too.
            """,
            ),
            "budget": (
                95,
                "19:00",
                """
                u*: Update on the kitchen: Brightwork found the wiring wasn't up to code, so the total is now going to be about £23,500.
                a: That's a big jump. Is the rewiring a separate line item?
                u: Yes, the rewire alone is £3,800 and the rest is extra plastering.
                a: Ask for the electrician's certificate once the rewire is done; you'll need it when you sell the house.
            """,
            ),
        },
        [
            Q(
                KU,
                "Which firm is doing our kitchen now?",
                "Brightwork Builders (Hartley & Sons were let go)",
                ("fired",),
                ("quotes",),
            ),
            Q(
                KU,
                "What's the latest cost estimate for the kitchen?",
                "About £23,500 (up from £18,000)",
                ("budget",),
                ("quotes",),
            ),
            Q(SU, "What's the name of Anika's nursery?", "Little Acorns", ("daycare",)),
            Q(
                PARA,
                "What was your advice when my baby's rest got disrupted?",
                "Consistent bedtime routine, cot drowsy but awake, move the feed earlier",
                ("sleep",),
            ),
            Q(
                SP,
                "Help me choose handles for the kitchen cupboards.",
                "Matte finishes (brushed brass or matte black); user dislikes glossy",
                ("worktop",),
            ),
            Q(
                TEMP,
                "Which happened first: Anika starting nursery or us changing builders?",
                "Changing builders (about four weeks earlier)",
                ("fired", "daycare"),
            ),
        ],
    ),
    Persona(
        "h04",
        "2023-09-18",
        {
            "thesis": (
                0,
                "10:00",
                """
                u*: I'm starting my PhD on seagrass meadows in the Ria Formosa lagoon, looking at how much carbon they store. My supervisor is Prof. Almeida.
                a: Great topic, blue carbon is getting a lot of attention. What are you working on first?
                u: A literature review on sediment carbon stocks. I have about 140 papers to get through.
                a: Use a reference manager with tags for method, site and sampling depth, and fill an extraction table as you read so the review practically writes itself.
            """,
            ),
            "cat": (
                20,
                "22:40",
                """
                u*: Pixel, my cat, has been sneezing and has gunky eyes for three days.
                a: That sounds like a feline upper respiratory infection. Has he seen a vet?
                u*: Yes, the vet gave him doxycycline for ten days and said to keep him warm.
                a: Give the full course even if he seems better, and warm his food slightly so he can smell it; cats with blocked noses often stop eating.
            """,
            ),
            "supervisor": (
                70,
                "14:20",
                """
                u*: Prof. Almeida has retired early, so my new supervisor is Dr. Hanna Keller from the ecology group.
                a: Big change. Have you met her to discuss the thesis plan?
                u: Next week. She's more into field experiments than models.
                a: Bring a one-page plan with your research questions and ask which chapters she sees as experimental. It's a chance to add a field component.
            """,
            ),
            "poster": (
                110,
                "16:05",
                """
                u: I'm presenting a poster at the Ocean Sciences Meeting in New Orleans in February. Any layout tips?
                a*: Check the size rule first; most sessions allow 48 by 36 inches, landscape. Use three columns, a headline title that states your finding, one big figure in the middle, and keep the text under 800 words.
                u: My main figure is a map of carbon stocks across the lagoon.
                a: Make that the centrepiece, with a colour scale readable from two metres away.
            """,
            ),
            "lme4": (
                130,
                "11:35",
                """
                u*: My mixed model in lme4 keeps giving 'boundary (singular) fit' when I add site as a random effect.
                a: That usually means the random-effect variance is estimated as zero: with few sites there isn't enough information to estimate it.
                u: I only have four sites.
                a: Four levels are too few for a reliable random effect. Treat site as a fixed effect or simplify the random structure, and report the choice.
            """,
            ),
            "pixel2": (
                150,
                "19:55",
                """
                u*: Pixel got over his infection, but now he refuses the renal diet food the vet prescribed after his blood test.
                a: Try mixing it gradually with his old food over ten days, warm it, or ask the vet about a different brand of renal diet.
                u: He's 14, so I suppose kidney problems aren't surprising.
                a: Very common at that age. Blood tests every six months will show whether the diet is helping.
            """,
            ),
        },
        [
            Q(
                KU,
                "Who is my thesis supervisor?",
                "Dr. Hanna Keller (Prof. Almeida retired)",
                ("supervisor",),
                ("thesis",),
            ),
            Q(PARA, "What underwater plants am I researching?", "Seagrass, in the Ria Formosa lagoon", ("thesis",)),
            Q(SA, "What poster dimensions did you say were typical?", "48 by 36 inches, landscape", ("poster",)),
            Q(SU, "What error did R give me for my mixed model?", "boundary (singular) fit", ("lme4",)),
            Q(
                MULTI,
                "How has my cat's health been over the past months?",
                "Respiratory infection treated with doxycycline; now kidney issues and a renal diet he refuses",
                ("cat", "pixel2"),
            ),
            Q(
                TEMP,
                "Did I change supervisors before or after Pixel's respiratory infection?",
                "After (about seven weeks later)",
                ("cat", "supervisor"),
            ),
        ],
    ),
    Persona(
        "h05",
        "2023-08-14",
        {
            "blight": (
                0,
                "09:15",
                """
                u*: The tomatoes in my greenhouse have brown patches on the leaves and the stems are going black. I think it's blight.
                a*: It does sound like late blight. Remove and bin (don't compost) the affected leaves, water at the base in the morning only, and open the vents to keep humidity down. Next year try blight-resistant varieties like 'Crimson Crush'.
                u: Can I save the fruit that's already there?
                a: Pick any green fruit without marks and ripen it indoors on a windowsill.
            """,
            ),
            "bookclub": (
                30,
                "15:30",
                """
                u*: It's my turn to host the book club next month and we've chosen 'Klara and the Sun'. Could you suggest some discussion questions?
                a: Lovely choice. You could ask whether Klara's devotion is love or programming, what the Sun represents, and how the book treats children who are 'lifted'.
                u: We're eight ladies, mostly retired teachers like me, so we do like a good argument.
                a: Then try a provocative one: would you have chosen to lift Josie?
            """,
            ),
            "japan": (
                60,
                "11:00",
                """
                u*: Ken and I are planning Japan for next April, for the cherry blossoms. We'd like to stay in a traditional ryokan in Kyoto.
                a: Wonderful. Peak blossom in Kyoto is usually the first week of April and ryokans book out early, so reserve soon. Would you like one with a private bath?
                u*: Yes, Ken's back is not great, so a private bath would be nice, and proper beds rather than futons.
                a: Then look at ryokans in Higashiyama; many offer rooms with private cypress baths and Western-style beds on request.
            """,
            ),
            "oliver": (
                90,
                "16:45",
                """
                u*: My grandson Oliver turns seven on the 3rd of December and he's mad about dinosaurs. What could I get him?
                a*: A fossil dig kit is a big hit at that age: he chips the plaster away to uncover replica fossils. You could pair it with a dinosaur encyclopedia.
                u: His mum says he already has loads of books.
                a*: Then go for the dig kit plus a day out together at a natural history museum, an experience he'll remember.
            """,
            ),
            "postponed": (
                150,
                "10:20",
                """
                u*: Ken needs a hip replacement in March, so we've pushed the Japan trip back to the autumn to see the leaves instead.
                a: Sorry to hear about Ken's hip, but autumn in Kyoto is gorgeous. The leaves there peak in mid to late November, so early October would still be quite green.
                u*: Oh! Then we'll aim for the second half of November.
                a: Good plan, and check the ryokan's cancellation policy before you rebook.
            """,
            ),
            "nextbook": (
                175,
                "14:10",
                """
                u*: The book club voted and we're reading 'Tomorrow, and Tomorrow, and Tomorrow' next. I'm a bit worried it's about video games.
                a: It is, but it's really about friendship, creativity and grief. Many readers who never play games love it.
                u: Good. The group meets on the 12th at Margaret's.
            """,
            ),
        },
        [
            Q(
                KU,
                "When are Ken and I going to Japan?",
                "Second half of November (moved from April because of Ken's hip surgery)",
                ("postponed",),
                ("japan",),
            ),
            Q(
                SA,
                "What present did you suggest for my grandson?",
                "A fossil dig kit (plus a museum day out)",
                ("oliver",),
            ),
            Q(
                PARA,
                "What disease attacked the crops in my glasshouse, and what did you advise?",
                "Late blight: bin affected leaves, water at the base, ventilate, resistant varieties",
                ("blight",),
            ),
            Q(
                KU,
                "What is our book club reading at the moment?",
                "'Tomorrow, and Tomorrow, and Tomorrow'",
                ("nextbook",),
                ("bookclub",),
            ),
            Q(
                TEMP,
                "How old will Oliver be when we travel to Japan?",
                "Seven (he turns eight on 3 December, after the late-November trip)",
                ("oliver", "postponed"),
            ),
            Q(
                SP,
                "Can you suggest somewhere for us to stay on our big trip?",
                "A Kyoto ryokan with a private bath and Western beds (Ken's back)",
                ("japan",),
            ),
        ],
    ),
    Persona(
        "h06",
        "2024-03-04",
        {
            "seed": (
                0,
                "08:30",
                """
                u*: We're raising a $1.5M seed round for Streaky and Northwind Ventures is keen to lead.
                a: Congratulations on the interest. Do you have a term sheet yet?
                u: Not yet, they want to see our retention numbers first. Our day-30 retention is 22%.
                a: That's decent for a consumer habit app. Prepare a cohort retention chart for the last six months and a clear story of what drives the best cohorts.
            """,
            ),
            "leah": (
                14,
                "22:15",
                """
                u: I'm clashing with my cofounder about the roadmap.
                a: What's the disagreement?
                u*: Leah runs design and wants to rebuild onboarding; I want to ship the team dashboard first. We've argued about it for a week.
                a: Agree on a decision rule before debating the options, for instance which change moves the metric investors care about most, then test the cheapest version of each.
            """,
            ),
            "pivot": (
                40,
                "13:00",
                """
                u*: We're pivoting. Streaky, our consumer habit-tracking app, isn't growing, so we're turning it into a B2B wellbeing platform that companies buy for their staff.
                a: That's a big shift. What made you confident in the B2B direction?
                u: Three HR managers asked to pay for team licences in the last month.
                a: That's a real signal. Run paid pilots with those three companies before rebuilding anything.
            """,
            ),
            "hire": (
                55,
                "18:20",
                """
                u*: I've offered our first engineering role to Marco, a Rust developer: $140k salary plus 1% equity vesting over four years.
                a: That's a competitive package. Include a one-year cliff and make sure the board approves the option grant.
                u: He asked whether the equity is options or shares.
                a: At seed stage it's almost always options; explain the strike price and the exercise window clearly.
            """,
            ),
            "insomnia": (
                70,
                "02:50",
                """
                u: I lie awake until 3am most nights running through the to-do list.
                a*: Try a worry dump: write tomorrow's tasks on paper an hour before bed, no screens after 10pm, and get up at the same time every day. If it lasts more than a few weeks, CBT-I (cognitive behavioural therapy for insomnia) is the most effective treatment.
                u: I'll try the paper list tonight.
            """,
            ),
            "closed": (
                92,
                "17:45",
                """
                u*: We closed the seed round! $2.1M in the end, led by Harbor Capital. Northwind dropped out after the pivot.
                a: Congratulations, and oversubscribed too! Time to plan the hiring roadmap?
                u: Yes, we want two more engineers and a sales lead by September.
            """,
            ),
        },
        [
            Q(
                KU,
                "Which investor led our seed round?",
                "Harbor Capital (Northwind dropped out)",
                ("closed",),
                ("seed",),
            ),
            Q(KU, "How much money did we end up raising?", "$2.1M (target was $1.5M)", ("closed",), ("seed",)),
            Q(
                PARA,
                "What did our company make before it changed direction?",
                "Streaky, a consumer habit-tracking app",
                ("pivot",),
            ),
            Q(
                SU,
                "What compensation did I offer our first engineer?",
                "$140k salary plus 1% equity over four years",
                ("hire",),
            ),
            Q(
                SA,
                "What did you recommend for my trouble getting to sleep?",
                "Worry dump on paper, no screens after 10pm, fixed wake time, CBT-I",
                ("insomnia",),
            ),
            Q(
                MULTI,
                "Who have I mentioned working with on the team so far?",
                "Leah (cofounder, design) and Marco (first engineer)",
                ("leah", "hire"),
            ),
        ],
    ),
    Persona(
        "h07",
        "2024-02-12",
        {
            "vegan": (
                0,
                "19:30",
                """
                u*: I'm vegan and seriously allergic to cashews, which rules out half the creamy vegan recipes online. Any ideas for a creamy pasta sauce?
                a: Blend silken tofu or white beans with garlic, lemon, nutritional yeast and some pasta water: you get a creamy sauce without any nuts.
                u: White beans sound great, I always have cannellini in the cupboard.
                a: Perfect, one tin of cannellini makes enough sauce for two.
            """,
            ),
            "wordpress": (
                20,
                "10:40",
                """
                u*: My food blog runs on WordPress and traffic has been flat at about 9,000 visits a month. How can I improve the SEO?
                a: Start with recipe schema markup so Google shows rich results, compress your images, and write posts that answer specific searches.
                u: The site is also really slow on mobile.
                a: A caching plugin and a lighter theme will help a lot.
            """,
            ),
            "buttermilk": (
                35,
                "16:05",
                """
                u: What can I use instead of buttermilk in pancakes?
                a*: Stir a tablespoon of lemon juice or cider vinegar into a cup of plant milk and leave it for five minutes until it curdles.
            """,
            ),
            "ghost": (
                50,
                "11:25",
                """
                u*: I finally migrated the blog from WordPress to Ghost last weekend. It's so much faster.
                a: Nice! Did your URLs stay the same? Broken links would hurt the search ranking you've built.
                u: Mostly, but the recipe category pages changed.
                a: Add 301 redirects from the old category URLs in Ghost's redirects file.
            """,
            ),
            "instantpot": (
                70,
                "18:00",
                """
                u: I got an Instant Pot Duo for my birthday. How long do dried chickpeas take?
                a*: Unsoaked chickpeas need about 40 minutes at high pressure followed by a 15-minute natural release; soaked ones about 12 minutes.
                u: I'll do a big batch for hummus on Sunday.
            """,
            ),
            "jonas": (
                88,
                "20:20",
                """
                u*: It's my partner Jonas's birthday on Friday and he loves Ethiopian food. I want to cook him a feast.
                a: How about misir wot (spiced red lentils), gomen (collard greens) and a tomato salad, with injera?
                u: Where would I even get injera?
                a: Ethiopian grocers often sell it fresh, or you can make a quick version with teff flour.
            """,
            ),
            "eggs": (
                110,
                "09:45",
                """
                u*: Small confession: I've started eating eggs again, from my neighbour's hens. So I'm vegetarian now rather than vegan.
                a: Thanks for telling me, I'll keep that in mind for recipes. Still no cashews, of course?
                u: Right, the allergy hasn't gone anywhere.
            """,
            ),
        },
        [
            Q(
                KU,
                "Do I eat eggs?",
                "Yes: now vegetarian, eats eggs from the neighbour's hens (was vegan)",
                ("eggs",),
                ("vegan",),
            ),
            Q(
                KU,
                "Which blogging platform is my site on?",
                "Ghost (migrated from WordPress)",
                ("ghost",),
                ("wordpress",),
            ),
            Q(
                SA,
                "How long did you tell me to pressure cook dried chickpeas?",
                "About 40 minutes at high pressure plus 15 minutes natural release (unsoaked)",
                ("instantpot",),
            ),
            Q(SU, "What cuisine does my partner love?", "Ethiopian", ("jonas",)),
            Q(
                SP,
                "Suggest a dessert I could bring to a potluck.",
                "Something nut-free (cashew allergy) and plant-based/vegetarian",
                ("vegan",),
            ),
            Q(
                SA,
                "What did you tell me to use when a pancake recipe calls for buttermilk?",
                "Plant milk with a tablespoon of lemon juice or cider vinegar",
                ("buttermilk",),
            ),
        ],
    ),
    Persona(
        "h08",
        "2024-01-29",
        {
            "gig": (
                0,
                "23:10",
                """
                u*: My band The Paper Lanterns has a gig at the Blue Room on the 9th of March. Can you help me order a 45-minute setlist?
                a: Open with something upbeat and familiar, put the new material in the middle, drop the energy once for a ballad, then finish with your two strongest songs.
                u: We have eleven songs ready; two are covers.
                a: Use one cover early to win the room and save the other for an encore.
            """,
            ),
            "tele": (
                15,
                "14:30",
                """
                u*: I bought a used 1998 Mexican Fender Telecaster for $650. The intonation is off on the high strings.
                a: Tune to pitch, then compare the 12th-fret harmonic with the fretted note. If the fretted note is sharp, move the saddle back; if it's flat, move it forward.
                u: It's got the old three-barrel bridge.
                a: Then you can only compensate in pairs; compensated brass saddles are a cheap upgrade that fixes that.
            """,
            ),
            "rates": (
                30,
                "10:05",
                """
                u*: I teach guitar to twelve students and charge $40 an hour. I want to raise it to $50. How do I tell them?
                a: Give a month's notice in writing, explain what has improved (materials, recordings), and consider keeping current students at $45 for six months.
                u: Most of them have been with me for years, so I feel guilty.
                a: Long-term students usually understand; your rate has probably been below the market for a while.
            """,
            ),
            "ears": (
                45,
                "12:15",
                """
                u: After Saturday's show my ears were ringing for two whole days.
                a: That's a warning sign of noise damage. Has it stopped now?
                u*: Mostly. I saw an audiologist and she recommended custom moulded musician's earplugs with ER-15 filters.
                a: Good advice; they cut about 15 dB evenly across frequencies, so the band still sounds natural. Wear them at every rehearsal too.
            """,
            ),
            "piano": (
                60,
                "07:50",
                """
                u*: I'm teaching myself piano now, 20 minutes of Hanon exercises every morning.
                a: Great habit. Keep the tempo slow with a metronome and add a simple piece alongside, so it's not only drills.
                u: Any suggestions?
                a: Try Satie's Gymnopédie No. 1: slow, beautiful and good for voicing.
            """,
            ),
            "trio": (
                85,
                "21:35",
                """
                u*: I've left The Paper Lanterns. I'm playing with a jazz trio now called Slow Orbit: guitar, double bass and drums.
                a: Big stylistic shift! Are you comfortable comping jazz chords?
                u: Getting there. I'm learning drop-2 voicings.
                a: Work through a few standards like 'Autumn Leaves' with drop-2 voicings on the middle four strings.
            """,
            ),
            "newrates": (
                100,
                "16:40",
                """
                u*: Update on the lessons: I went with $55 an hour in the end and nobody left.
                a: Great result, that says a lot about your teaching.
                u: I've even got a waiting list of three.
                a: Then you could open a small group class for the waiting list.
            """,
            ),
        },
        [
            Q(
                KU,
                "Which group am I playing in now?",
                "Slow Orbit, a jazz trio (left The Paper Lanterns)",
                ("trio",),
                ("gig",),
            ),
            Q(KU, "What's my hourly rate for guitar lessons?", "$55 an hour (was $40)", ("newrates",), ("rates",)),
            Q(
                PARA,
                "What did the specialist suggest after that loud night left me with tinnitus?",
                "Custom moulded musician's earplugs with ER-15 filters",
                ("ears",),
            ),
            Q(
                SU,
                "What guitar did I buy and how much did it cost?",
                "A used 1998 Mexican Fender Telecaster for $650",
                ("tele",),
            ),
            Q(
                TEMP,
                "How many weeks after the Blue Room gig did I leave the band?",
                "About six to seven weeks (9 March to late April)",
                ("gig", "trio"),
            ),
            Q(
                MULTI,
                "Which instruments am I working on these days?",
                "Guitar (the Telecaster, jazz voicings) and piano (Hanon exercises)",
                ("tele", "piano"),
            ),
        ],
    ),
    Persona(
        "h09",
        "2024-01-08",
        {
            "nights": (
                0,
                "06:40",
                """
                u*: I work nights in the ICU at Manchester Royal, three 12-hour shifts a week. What should I meal prep so I stop living on vending machine crisps?
                a: Aim for a proper meal before the shift and a lighter one around 2am: chicken and vegetable traybakes, lentil soup in a flask, and overnight oats for after you get home.
                u: I only have a microwave on the unit.
                a: Then soups, grain bowls and curries that reheat well are your friends; batch them on your first day off.
            """,
            ),
            "potassium": (
                9,
                "13:20",
                """
                u: What's the normal range for potassium in adults?
                a*: Typically 3.5 to 5.0 mmol/L in serum, though reference ranges vary slightly between labs.
            """,
            ),
            "pottery": (
                18,
                "21:00",
                """
                u*: I joined a pottery class on Thursday evenings. My first bowl came out wonky but I love it.
                a: Wonky bowls are a rite of passage! What clay and glazes are you using?
                u: Stoneware, and the studio fires the glazes to cone 6.
                a*: Cone 6 is mid-fire, around 1,220 °C. Dip glazes for about three seconds and wipe the foot clean so it doesn't stick to the kiln shelf.
            """,
            ),
            "car": (
                40,
                "12:10",
                """
                u*: I'm buying a 2019 Toyota Yaris hybrid for £11,200 from a dealer. What should I check?
                a: Ask for the full service history, confirm the hybrid battery health check has been done, look up the MOT history online and test drive it from cold.
                u: It has 38,000 miles.
                a: That's reasonable for its age; Toyota hybrid batteries usually last well beyond 100,000 miles.
            """,
            ),
            "mph": (
                62,
                "20:45",
                """
                u*: I'm applying for the part-time Master of Public Health at the University of Leeds. Can you help with my personal statement?
                a: Sure. Open with a specific moment from the ICU that made you care about prevention, then connect it to what you want to study.
                u: I kept seeing young patients with uncontrolled diabetes.
                a: That's a strong thread; link it to population-level interventions.
            """,
            ),
            "dayshift": (
                90,
                "19:30",
                """
                u*: I've switched to day shifts! I'm now working in the outpatient dialysis unit, Monday to Thursday, 8 to 6.
                a: That's a big change from nights. How is your sleep adjusting?
                u: Much better already, I feel human again.
            """,
            ),
            "accepted": (
                120,
                "17:05",
                """
                u*: I got into the Leeds MPH! It starts in September and I'll do it alongside my job.
                a: Congratulations! Have you planned how to fit study around four ten-hour days?
                u: Fridays will be my study day.
            """,
            ),
        },
        [
            Q(
                KU,
                "What shifts am I working these days?",
                "Day shifts in the outpatient dialysis unit, Mon-Thu 8 to 6 (was ICU nights)",
                ("dayshift",),
                ("nights",),
            ),
            Q(PARA, "What vehicle did I end up purchasing?", "A 2019 Toyota Yaris hybrid for £11,200", ("car",)),
            Q(
                SA,
                "What temperature did you say the glazes at my class are fired at?",
                "Cone 6, around 1,220 °C",
                ("pottery",),
            ),
            Q(
                MULTI,
                "Where does my master's application stand?",
                "Applied to the part-time Leeds MPH and was accepted; starts in September",
                ("mph", "accepted"),
            ),
            Q(
                TEMP,
                "Did I buy the car before or after moving to day shifts?",
                "Before (about seven weeks earlier)",
                ("car", "dayshift"),
            ),
            Q(SA, "What did you tell me the normal adult potassium range is?", "3.5 to 5.0 mmol/L", ("potassium",)),
        ],
    ),
    Persona(
        "h10",
        "2024-02-19",
        {
            "climb": (
                0,
                "21:30",
                """
                u*: I boulder at Ostbloc twice a week and I'm projecting my first V4. I keep falling off the last move, a big deadpoint to a sloper.
                a: Deadpoints to slopers need your hips close to the wall as you hit the hold. Practise the move in isolation and build body tension with hanging leg raises.
                u: My fingers are also sore after sessions.
                a: Take a rest day between sessions and warm up on easy problems for 15 minutes first.
            """,
            ),
            "flathunt": (
                14,
                "12:00",
                """
                u*: We're flat hunting in Berlin, ideally Neukölln, two bedrooms, up to €1,400 warm.
                a: That's tight for Neukölln at the moment. Have your documents ready: SCHUFA, three payslips and a Mietschuldenfreiheitsbescheinigung.
                u: We've been to eleven viewings already.
                a: Send a short personal cover note with each application, it helps you stand out.
            """,
            ),
            "baby": (
                35,
                "08:15",
                """
                u*: Mira and I are expecting our first baby! The due date is the 12th of August.
                a: Congratulations to you both! How is Mira feeling?
                u: Tired, but the nausea has finally gone.
            """,
            ),
            "lease": (
                60,
                "18:45",
                """
                u*: We signed a lease! It's in Pankow, not Neukölln: three rooms, €1,550 warm, from the 1st of June.
                a: Congratulations! Pankow is great for families. Have you booked the handover for the old flat?
                u: Not yet, we'll do it at the end of May.
            """,
            ),
            "cargo": (
                80,
                "07:55",
                """
                u: I commute 9 km by bike to the office.
                a: Nice distance for a daily ride.
                u*: We just bought an Urban Arrow cargo bike so I can take the baby to daycare later.
                a*: Great choice. Look for the Maxi-Cosi adapter or the Urban Arrow infant seat for babies under nine months.
            """,
            ),
            "spanish": (
                95,
                "22:05",
                """
                u*: My Duolingo Spanish streak hit 200 days, but I still can't hold a real conversation.
                a: Time to add speaking practice: a weekly tandem partner or a Berlin language café, plus shadowing short dialogues.
                u: A language café sounds less scary.
            """,
            ),
        },
        [
            Q(
                KU,
                "Which neighbourhood is our new flat in?",
                "Pankow (they had been looking in Neukölln)",
                ("lease",),
                ("flathunt",),
            ),
            Q(SU, "When is the baby due?", "12 August", ("baby",)),
            Q(
                PARA,
                "What's the hardest grade I'm trying at the climbing wall?",
                "V4 (bouldering at Ostbloc)",
                ("climb",),
            ),
            Q(
                MULTI,
                "What have we done so far to get ready for the baby?",
                "Signed a lease on a bigger flat and bought an Urban Arrow cargo bike (infant seat)",
                ("cargo", "lease"),
            ),
            Q(
                TEMP,
                "How long before the due date does our new lease start?",
                "About ten weeks (1 June vs 12 August)",
                ("baby", "lease"),
            ),
        ],
    ),
    Persona(
        "h11",
        "2024-01-10",
        {
            "coeliac": (
                0,
                "20:00",
                """
                u*: I was diagnosed with coeliac disease last week, so I have to go completely gluten-free. It's overwhelming.
                a: That's a lot to take in. The basics: no wheat, barley or rye; oats only if certified gluten-free; and watch for cross-contamination from toasters and shared butter.
                u: Eating out is what worries me most.
                a: Use an app like Find Me Gluten Free and always tell staff it's coeliac disease, not a preference.
            """,
            ),
            "venue": (
                20,
                "13:40",
                """
                u*: We booked the Old Boathouse in Henley for the wedding reception on the 21st of September!
                a: Beautiful spot on the river. How many guests?
                u: About 90, with a jazz band in the evening.
            """,
            ),
            "azores": (
                45,
                "21:25",
                """
                u: For the honeymoon we're torn between the Azores and Patagonia. We like hiking and want something not too hot.
                a*: For the Azores, combine São Miguel for the crater lakes and hot springs with Flores for its waterfalls and quiet coastal hikes. Ten days is perfect.
                u*: I'm leaning towards the Azores, the flights are shorter.
            """,
            ),
            "patagonia": (
                75,
                "19:10",
                """
                u*: We changed our minds: the honeymoon is Patagonia after all. We've booked the W Trek in Torres del Paine for early October.
                a: Amazing! October is early spring there, so expect wind and cold nights; pack layers and a good windproof shell.
                u: We're staying in refugios rather than camping.
            """,
            ),
            "partner": (
                95,
                "18:30",
                """
                u*: I've been made a partner at Whitcombe Hale! I'll be managing four associates in the employment team.
                a: Huge congratulations! Any worries about moving into management?
                u: Mostly how to give feedback without being the bad guy.
                a: Make feedback frequent and specific, tie it to the work rather than the person, and ask associates how they think it went first.
            """,
            ),
            "cake": (
                110,
                "11:15",
                """
                u*: We've ordered the wedding cake: a gluten-free lemon and elderflower cake from Crumb & Co, so I can actually eat it!
                a: That sounds delicious. Will the whole cake be gluten-free or just one tier?
                u: The whole thing, it's made in a dedicated gluten-free bakery.
            """,
            ),
        },
        [
            Q(
                KU,
                "Where are we going on our honeymoon?",
                "Patagonia, the W Trek in Torres del Paine (not the Azores)",
                ("patagonia",),
                ("azores",),
            ),
            Q(
                SP,
                "Can you recommend a snack I could grab at the airport?",
                "Something certified gluten-free (coeliac disease)",
                ("coeliac",),
            ),
            Q(SU, "Where is our wedding reception?", "The Old Boathouse in Henley, 21 September", ("venue",)),
            Q(
                PARA,
                "What promotion did I get at my firm?",
                "Made partner at Whitcombe Hale, managing four associates",
                ("partner",),
            ),
            Q(
                SA,
                "Which islands did you suggest when we were considering the Atlantic option?",
                "São Miguel and Flores (Azores)",
                ("azores",),
            ),
            Q(
                MULTI,
                "What do I have to watch out for with food, and how did we handle the wedding cake?",
                "Coeliac: strictly gluten-free; a gluten-free lemon and elderflower cake from Crumb & Co",
                ("coeliac", "cake"),
            ),
        ],
    ),
    Persona(
        "h12",
        "2023-10-02",
        {
            "bills": (
                0,
                "20:50",
                """
                u*: Our gas bill has gone through the roof. We heat the house with a 15-year-old gas boiler. Would a heat pump be worth it?
                a: Possibly. In England the Boiler Upgrade Scheme gives £7,500 towards an air source heat pump. It works best if the house is well insulated and the radiators are sized for lower flow temperatures.
                u: The loft has 270 mm of insulation but the walls are solid brick.
                a: Then get a heat loss survey first; solid walls may mean a few radiators need upsizing.
            """,
            ),
            "solar": (
                20,
                "17:25",
                """
                u*: The solar panels went up yesterday: ten panels, 4.2 kW in total, installed by SunBright.
                a: Nice. In the UK a 4.2 kW system typically generates around 3,500 kWh a year. Are you getting a battery?
                u: Not yet, maybe next year.
                a: Make sure you sign up to a Smart Export Guarantee tariff so you're paid for what you export.
            """,
            ),
            "mot": (
                40,
                "09:40",
                """
                u*: My 2012 diesel VW Golf just failed its MOT on emissions.
                a: Often that's a clogged DPF or a faulty EGR valve. A garage can try a forced regeneration before replacing anything.
                u: It's done 140,000 miles, I'm wondering if it's time to let it go.
            """,
            ),
            "ev": (
                70,
                "19:05",
                """
                u*: I sold the Golf and we're now leasing a Kia e-Niro. The electrician fitted a 7 kW home charger on Monday.
                a: Great move, especially with solar. Set the charger to use surplus solar during the day or schedule cheap overnight charging.
                u: The charger app has a solar mode, I'll try it.
            """,
            ),
            "slugs": (
                100,
                "07:30",
                """
                u: On the allotment I'm growing potatoes and runner beans, but something is shredding the bean seedlings overnight.
                a: Almost certainly slugs. Do you see silvery trails in the morning?
                u*: Yes, loads of slime trails.
                a*: Sink beer traps into the soil, put copper tape or wool pellets around the seedlings, and go out with a torch after dark to pick them off. A small pond will bring in frogs too.
            """,
            ),
            "heatpump": (
                150,
                "21:15",
                """
                u*: The heat pump is in! A 7 kW Vaillant aroTHERM replaced the old gas boiler last week and we've capped the gas supply.
                a: Brilliant. Set a weather compensation curve and leave it running steadily rather than switching it on and off.
                u: The installer set the flow temperature to 45 degrees.
            """,
            ),
        },
        [
            Q(KU, "What car do I drive now?", "A leased Kia e-Niro (the diesel Golf was sold)", ("ev",), ("mot",)),
            Q(
                KU,
                "How is our house heated these days?",
                "A 7 kW Vaillant aroTHERM heat pump (gas boiler removed)",
                ("heatpump",),
                ("bills",),
            ),
            Q(SU, "How many kilowatts is my solar installation?", "4.2 kW, ten panels", ("solar",)),
            Q(
                PARA,
                "How did you suggest I protect my vegetables from those slimy pests?",
                "Beer traps, copper tape or wool pellets, torchlight picking, a pond for frogs",
                ("slugs",),
            ),
            Q(
                TEMP,
                "Did the solar panels go in before or after we got the electric car?",
                "Before (about seven weeks earlier)",
                ("solar", "ev"),
            ),
        ],
    ),
    Persona(
        "h13",
        "2023-09-25",
        {
            "exchange": (
                0,
                "15:00",
                """
                u*: I've been accepted for an exchange semester at the University of Copenhagen next spring! How do I find housing?
                a: Congratulations! Apply for university-arranged housing through the Housing Foundation Copenhagen as early as possible; private rentals are expensive and scams are common.
                u: Is it normal to pay a deposit before seeing the room?
                a: Through the Housing Foundation, yes. For private listings never pay before a video viewing and a signed contract.
            """,
            ),
            "barista": (
                15,
                "22:30",
                """
                u*: I work part-time as a barista at Grind House, about 15 hours a week. My manager keeps scheduling me during lectures.
                a: Give your manager your timetable in writing and ask for fixed shifts on your free afternoons.
                u: I'll bring it up on Monday.
            """,
            ),
            "chloe": (
                30,
                "23:15",
                """
                u*: My flatmate Chloe never does her share of the cleaning and it's driving me mad.
                a: Suggest a written cleaning rota on the fridge, with tasks rotating weekly, and agree on it together.
                u: We tried that, she 'forgets' every time.
                a: Then have a calm conversation about expectations, and consider splitting the cost of a cleaner every two weeks.
            """,
            ),
            "danish": (
                50,
                "19:20",
                """
                u*: I'm learning Danish on Babbel before Copenhagen, but the pronunciation is brutal. 'Rødgrød med fløde' is impossible.
                a: Danish is famous for that! Focus on the soft d and the glottal stop, listen to DR podcasts and repeat out loud.
                u: I'll try ten minutes of podcasts every day.
            """,
            ),
            "lab": (
                70,
                "16:35",
                """
                u*: I quit Grind House. I'm now a research assistant in Prof. Mendes's psychology lab, 10 hours a week, coding sleep diary data.
                a: That's a great move for your CV. Is it related to your dissertation?
                u*: Yes, partly, the data could feed into it.
            """,
            ),
            "thesis": (
                85,
                "11:50",
                """
                u*: My dissertation is going to be about how sleep affects memory consolidation in university students.
                a: Great topic. You could compare recall after a night of sleep with the same interval awake, using the lab's sleep diary data to control for habitual sleep.
                u: Prof. Mendes said I can use the data.
            """,
            ),
        },
        [
            Q(
                KU,
                "Where do I work part-time?",
                "Research assistant in Prof. Mendes's psychology lab (quit Grind House)",
                ("lab",),
                ("barista",),
            ),
            Q(
                SU,
                "Which university am I going to on exchange?",
                "University of Copenhagen, spring semester",
                ("exchange",),
            ),
            Q(
                PARA,
                "What is the disagreement with the person I share my apartment with?",
                "Chloe doesn't do her share of the cleaning",
                ("chloe",),
            ),
            Q(
                MULTI,
                "What am I doing to prepare for my semester abroad?",
                "Housing through the Housing Foundation; learning Danish on Babbel",
                ("exchange", "danish"),
            ),
            Q(
                MULTI,
                "How does my research assistant job connect to my dissertation?",
                "The lab's sleep diary data feeds the sleep and memory consolidation dissertation",
                ("lab", "thesis"),
            ),
        ],
    ),
    Persona(
        "h14",
        "2024-01-15",
        {
            "fuji": (
                0,
                "20:10",
                """
                u*: I shoot on a Fujifilm X-T4 and I want a wide-angle lens for landscapes.
                a: The XF 10-24mm f/4 R OIS WR is the go-to: sharp, weather sealed and stabilised. If you'd like a prime, the XF 16mm f/1.4 is lovely for night skies.
                u: The zoom sounds more versatile, I'll look for a used one.
            """,
            ),
            "iceland": (
                14,
                "22:00",
                """
                u*: Layla and I are going to Iceland in February and I really want to photograph the northern lights.
                a*: Use a sturdy tripod, focus manually on a distant light, ISO 1600 to 3200, your widest aperture and 10 to 20 second exposures. Keep spare batteries warm in an inner pocket.
                u: Will my phone do?
                a: Modern phones manage in night mode, but the camera on a tripod will be far better.
            """,
            ),
            "prints": (
                35,
                "10:30",
                """
                u*: I've opened an Etsy shop, Omar Frames, selling my landscape prints. I'm charging £45 for an A3 print.
                a: That's fair for a signed archival print. Offer a limited edition of 50 for your best images to justify a higher price.
                u: Good idea, I'll start with the Icelandic beach shots.
            """,
            ),
            "sony": (
                60,
                "18:15",
                """
                u*: I've switched systems: sold all my Fuji gear and bought a Sony A7 IV.
                a: Full frame will help a lot in low light. Which lenses did you get?
                u: The 20mm f/1.8 G and the 24-105 f/4.
            """,
            ),
            "edinburgh": (
                80,
                "12:40",
                """
                u*: For Layla's birthday I'm surprising her with a weekend in Edinburgh. I've booked dinner at The Witchery.
                a: Lovely. Add a walk up Arthur's Seat at sunrise if the weather holds, great photos too.
                u: She'll love that, she's an early riser.
            """,
            ),
            "visa": (
                100,
                "09:05",
                """
                u*: I need a Schengen visa for our trip to Italy in June. What documents do I need?
                a: Typically the application form, passport, two photos, travel insurance covering €30,000, flight and hotel bookings and three months of bank statements. Apply through VFS Global at least six weeks ahead.
                u: We fly to Rome on the 14th of June.
            """,
            ),
        },
        [
            Q(KU, "Which camera do I shoot with now?", "A Sony A7 IV (sold the Fujifilm X-T4)", ("sony",), ("fuji",)),
            Q(
                PARA,
                "What exposure settings did you recommend for shooting the aurora?",
                "Tripod, manual focus, ISO 1600-3200, widest aperture, 10-20 s exposures",
                ("iceland",),
            ),
            Q(SU, "How much do I charge for an A3 print?", "£45, on the Etsy shop Omar Frames", ("prints",)),
            Q(
                TEMP,
                "Which trip with Layla came first, Iceland or Edinburgh?",
                "Iceland (February), then Edinburgh (April)",
                ("iceland", "edinburgh"),
            ),
            Q(
                MULTI,
                "Which trips have I planned this year?",
                "Iceland in February, Edinburgh for Layla's birthday, Italy (Rome) in June",
                ("iceland", "edinburgh", "visa"),
            ),
        ],
    ),
]

# ---------------------------------------------------------------------------------------
# Distractors: ordinary multi-turn chats on other subjects (saved as episodes) ...
DISTRACTORS: list[list[Turn]] = _sessions(
    """
        u: How do I flatten a list of lists in Python?
        a: Use a comprehension: [x for sub in nested for x in sub], or itertools.chain.from_iterable(nested).
        u: Which one is faster for big lists?
        a: chain.from_iterable is usually a little faster and avoids building intermediate lists.
    """,
    """
        u: Can you explain why central banks raise interest rates when inflation is high?
        a: Higher rates make borrowing more expensive, which cools spending and investment and eases price pressure.
        u: Doesn't that also hurt jobs?
        a: It can; central banks try to slow demand enough to bring inflation down without causing a recession.
    """,
    """
        u: Recommend a film for a rainy Sunday afternoon, something cosy.
        a: Paddington 2 is hard to beat, or Amélie if you fancy subtitles.
        u: We've seen Paddington 2 three times already.
        a: Then try The Secret Life of Walter Mitty or Chef, both warm and easy to watch.
    """,
    """
        u: How do I write a VLOOKUP that returns a value from the third column?
        a: =VLOOKUP(A2, Sheet2!A:C, 3, FALSE); FALSE forces an exact match.
        u: It returns #N/A for some rows.
        a: Check for trailing spaces or numbers stored as text; TRIM and VALUE usually fix it, or switch to XLOOKUP.
    """,
    """
        u: Why did the Western Roman Empire fall?
        a: Historians point to several causes: political instability, economic troubles, reliance on mercenaries and pressure from migrating peoples.
        u: Was there a single decisive moment?
        a: 476 AD, when Odoacer deposed Romulus Augustulus, is the traditional date, but the decline took centuries.
    """,
    """
        u: I have three very ripe bananas. What can I bake?
        a: Banana bread: mash the bananas with melted butter, sugar, an egg, flour and baking soda, then bake for about an hour at 175 °C.
        u: Can I add chocolate chips?
        a: Yes, fold in a handful at the end; walnuts work well too.
    """,
    """
        u: What should I look for in a laptop for programming?
        a: At least 16 GB of RAM, a fast SSD, a good keyboard and a screen you can read for hours.
        u: Is a MacBook Air enough?
        a: For most development, yes; heavy Docker or machine learning work benefits from more memory.
    """,
    """
        u: How do mRNA vaccines work?
        a: They deliver instructions for cells to make a harmless piece of a viral protein, which trains the immune system to recognise the real virus.
        u: Does the mRNA change my DNA?
        a: No, it never enters the nucleus and breaks down within days.
    """,
    """
        u: The leaves on a monstera are turning yellow. What's wrong?
        a: Most often it's overwatering. Let the top few centimetres of soil dry out between waterings and check the pot drains.
        u: The pot has no hole at the bottom.
        a: Repot it into one that drains; soggy roots rot quickly.
    """,
    """
        u: Write a short birthday message for a colleague I don't know very well.
        a: Happy birthday! Wishing you a relaxing day and a great year ahead.
        u: Something a bit warmer?
        a: Happy birthday! It's been a pleasure working with you, I hope your day is as lovely as you are to work with.
    """,
    """
        u: What chess openings are good for beginners?
        a: The Italian Game and the London System teach solid development without much theory.
        u: And with black?
        a: Try the Caro-Kann against 1.e4 and the Queen's Gambit Declined against 1.d4.
    """,
    """
        u: How often should I check my tyre pressures?
        a: Once a month and before long journeys, with the tyres cold.
        u: Where do I find the right pressure?
        a: On a sticker inside the driver's door frame or in the handbook.
    """,
    """
        u: Can you explain how compound interest works?
        a: You earn interest on the interest: each period's interest is added to the balance, so growth accelerates over time.
        u: So 5% a year doubles money in how long?
        a: About 14 years; the rule of 72 gives 72 / 5 = 14.4.
    """,
    """
        u: Give me a five-minute breathing exercise for stress.
        a: Box breathing: in for four counts, hold for four, out for four, hold for four. Repeat for five minutes.
        u: I get dizzy holding my breath.
        a: Then skip the holds and just breathe out longer than you breathe in, for example in for four and out for six.
    """,
    """
        u: Suggest a board game for six adults who don't play much.
        a: Codenames or Just One: quick to learn and very social.
        u: Something with a bit more strategy?
        a: Try Ticket to Ride or 7 Wonders, both handle six players well.
    """,
    """
        u: My Wi-Fi keeps dropping in the evening. Any idea why?
        a: Evening congestion on the 2.4 GHz band is common. Switch the router to a less crowded channel or use 5 GHz where you can.
        u: How do I find a free channel?
        a: A Wi-Fi analyser app shows which channels neighbouring networks use.
    """,
    """
        u: Summarise the plot of Hamlet in a few sentences.
        a: Prince Hamlet learns from his father's ghost that his uncle Claudius murdered the king. His hesitation and feigned madness lead to the deaths of Polonius, Ophelia, Gertrude, Laertes, Claudius and Hamlet himself.
        u: Why does he delay so long?
        a: Critics disagree: moral doubt, melancholy, and uncertainty about whether the ghost is honest are the usual readings.
    """,
    """
        u: How do I get red wine out of a cotton shirt?
        a: Blot it, rinse from the back with cold water, then apply a paste of washing-up liquid and hydrogen peroxide before washing.
        u: It's been dry for a day.
        a: Soak it overnight in an oxygen-based stain remover first, then wash as usual.
    """,
    """
        u: How do I undo my last git commit but keep the changes?
        a: git reset --soft HEAD~1 moves the branch back one commit and leaves your changes staged.
        u: And if I already pushed it?
        a: Then prefer git revert HEAD, which adds a new commit undoing it instead of rewriting shared history.
    """,
    """
        u: My sourdough starter isn't rising anymore. What am I doing wrong?
        a: It may be too cold or underfed. Keep it around 24 °C and feed it twice a day at a 1:1:1 ratio for a few days.
        u: I've been using tap water.
        a: Heavily chlorinated water can slow it down; let the water stand for a few hours or use filtered water.
    """,
    """
        u: How can I politely decline a meeting that I don't need to attend?
        a: Thank them, say you don't think you'd add much this time, and ask for the notes or offer to review a summary.
        u: It's from a senior director.
        a: Then add a line offering to join if there's a specific question for you, so it reads as focus rather than disinterest.
    """,
    """
        u: What actually happens at the event horizon of a black hole?
        a: It's the boundary beyond which nothing, not even light, can escape. A falling observer notices nothing special crossing it, while a distant observer sees them slow and redden.
        u: Would I be spaghettified?
        a: Near a small black hole, yes; near a supermassive one the tidal forces at the horizon are gentle.
    """,
    """
        u: What's the difference between an inner join and a left join in SQL?
        a: An inner join keeps only rows with a match in both tables; a left join keeps every row of the left table and fills NULLs where there's no match.
        u: How do I find rows with no match?
        a: Left join and filter WHERE right_table.id IS NULL.
    """,
    """
        u: How do I clean a cast iron pan without ruining it?
        a: Rinse it with hot water and a brush, a little soap is fine, dry it on the hob and wipe a thin film of oil inside.
        u: It has a few rust spots.
        a: Scrub them off with steel wool, then re-season: thin coat of oil, an hour upside down in a 230 °C oven.
    """,
    """
        u: What's the best way to get from Paris to Amsterdam?
        a: The Eurostar (formerly Thalys) direct train takes about three hours twenty minutes, city centre to city centre.
        u: Is it cheaper to fly?
        a: Sometimes, but after airport transfers and security the train is usually faster door to door.
    """,
    """
        u: What's the difference between a virus and a bacterium?
        a: Bacteria are living single cells that can reproduce on their own; viruses are much smaller and need a host cell to replicate.
        u: So antibiotics don't work on colds?
        a: Right, colds are viral, so antibiotics won't help.
    """,
    """
        u: I'd like to knit a simple scarf. Where do I start?
        a: Use chunky yarn and 8 mm needles, cast on about 25 stitches and knit every row (garter stitch) until it's long enough.
        u: How long is long enough?
        a: Roughly your height minus 30 cm is a comfortable length for a wrap-around scarf.
    """,
    """
        u: How do I back up the photos on my iPhone?
        a: Turn on iCloud Photos in Settings, or connect it to a computer and import them with the Photos app.
        u: My iCloud is full.
        a: Either upgrade the storage plan or copy the photos to an external drive and then enable 'Optimise iPhone Storage'.
    """,
    """
        u: Can you suggest a short stretching routine after sitting all day?
        a: Try hip flexor lunges, a standing hamstring stretch, chest opener against a doorway and neck rolls, 30 seconds each.
        u: My lower back is stiff too.
        a: Add cat-cow and child's pose for a minute each.
    """,
    """
        u: Explain the offside rule in football simply.
        a: An attacker is offside if, when the ball is played to them, they are nearer the opponents' goal line than both the ball and the second-last defender.
        u: What if they're level?
        a: Level is onside.
    """,
    """
        u: What games can I run at a birthday party for eight-year-olds?
        a: Treasure hunt, musical statues, pass the parcel and a relay race work well for that age.
        u: It'll be indoors.
        a: Then go for a treasure hunt with picture clues, musical statues and a craft table.
    """,
    r"""
        u: What's a reasonable regular expression for validating an email address?
        a: A pragmatic one is ^[^@\s]+@[^@\s]+\.[^@\s]+$; fully RFC-compliant regexes are huge and rarely worth it.
        u: Should I rely on it?
        a: Use it as a sanity check and confirm ownership by sending a verification email.
    """,
    """
        u: Any tips for a first-time dinner party for six?
        a: Choose a main you can make ahead, like a slow-cooked stew, a simple starter and a shop-bought dessert you dress up.
        u: One guest is gluten intolerant.
        a: Then serve the stew with rice or potatoes instead of bread, and check stock cubes for wheat.
    """,
    """
        u: How do solar eclipses work?
        a: The Moon passes between the Earth and the Sun and casts its shadow on part of the Earth.
        u: Why don't they happen every month?
        a: The Moon's orbit is tilted about five degrees, so usually its shadow misses the Earth.
    """,
)

# ... and sessions the save heuristics should skip: greetings and one-line lookups.
GREETINGS: list[list[Turn]] = _sessions(
    """
        u: Good morning!
        a: Good morning! How can I help today?
        u: Thanks, bye!
    """,
    """
        u: Hi there
        a: Hello! What can I do for you?
        u: Ok, thanks!
    """,
    """
        u: Hey
        a: Hi! Anything I can help with?
        u: Cool, thanks, see you later
    """,
)
LOOKUPS: list[list[Turn]] = _sessions(
    """
        u: How many millilitres are in a US cup?
        a: About 237 ml.
    """,
    """
        u: What is the capital of Australia?
        a: Canberra.
    """,
    """
        u: How many minutes should I boil an egg for a soft yolk?
        a: About six minutes from boiling.
    """,
    """
        u: What's 15% of 80?
        a: 12.
    """,
    """
        u: When does daylight saving time end this year?
        a: On the last Sunday of October in Europe.
    """,
    """
        u: How do you spell 'necessary'?
        a: N-E-C-E-S-S-A-R-Y: one c, two s.
    """,
)


# ---------------------------------------------------------------------------------------
def _turns(turns: list[Turn]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for role, text in turns:
        item: dict[str, object] = {"role": {"u": "user", "a": "assistant"}[role.rstrip("*")], "content": text}
        if role.endswith("*"):
            item["has_answer"] = True
        out.append(item)
    return out


def build(seed: int = SEED) -> dict[str, object]:
    rng = random.Random(seed)
    haystacks, questions = [], []
    for persona in PERSONAS:
        start = datetime.fromisoformat(persona.start)
        span = max(day for day, _, _ in persona.sessions.values())
        planned: list[tuple[datetime, str, list[Turn]]] = []
        for key, (day, hhmm, text) in persona.sessions.items():
            hour, minute = map(int, hhmm.split(":"))
            planned.append((start + timedelta(days=day, hours=hour, minutes=minute), key, transcript(text)))
        fillers = [("distractor", t) for t in rng.sample(DISTRACTORS, DISTRACTORS_PER_HAYSTACK)]
        fillers.append(("lookup", rng.choice(LOOKUPS)))
        if rng.random() < 0.5:
            fillers.append(("greeting", rng.choice(GREETINGS)))
        for n, (kind, turns) in enumerate(fillers):
            when = start + timedelta(
                days=rng.randint(1, span - 1), hours=rng.randint(7, 22), minutes=rng.randint(0, 59)
            )
            planned.append((when, f"_{kind}{n}", turns))
        planned.sort(key=lambda p: (p[0], p[1]))
        ids = {key: f"{persona.hid}_s{i + 1:02d}" for i, (_, key, _) in enumerate(planned)}
        haystacks.append(
            {
                "haystack_id": persona.hid,
                "haystack_session_ids": [ids[key] for _, key, _ in planned],
                "haystack_dates": [when.strftime(DATE_FMT) for when, _, _ in planned],
                "haystack_sessions": [_turns(turns) for _, _, turns in planned],
            }
        )
        asked = (planned[-1][0] + timedelta(days=7)).replace(hour=10, minute=0)
        for i, q in enumerate(persona.questions):
            questions.append(
                {
                    "question_id": f"{persona.hid}_q{i + 1:02d}",
                    "haystack_id": persona.hid,
                    "question_type": q.type,
                    "question": q.question,
                    "answer": q.answer,
                    "question_date": asked.strftime(DATE_FMT),
                    "answer_session_ids": [ids[k] for k in q.gold],
                    "superseded_session_ids": [ids[k] for k in q.superseded],
                }
            )
    return {
        "name": "agtos-devset",
        "description": (
            "Hand-written long-memory development set in the LongMemEval shape (haystacks stored once, "
            "shared by their questions as in LoCoMo). Generated by benchmarks/eval/make_devset.py "
            f"(seed {seed}); superseded_session_ids name the sessions a knowledge update replaced."
        ),
        "source_format": "haystacks",
        "haystacks": haystacks,
        "questions": questions,
    }


def render(data: dict[str, object]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="fail if --out differs from what would be generated")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'OUT OF DATE (rerun make_devset)'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    data = json.loads(text)
    sessions = sum(len(h["haystack_session_ids"]) for h in data["haystacks"])
    print(
        f"wrote {args.out}: {len(data['haystacks'])} haystacks, {sessions} sessions, {len(data['questions'])} questions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

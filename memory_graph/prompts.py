"""The texts served as MCP prompts: the reference's personalization instructions and the lessons workflow."""

# ruff: noqa: E501  (the prompt keeps the reference's lines as they are)

from __future__ import annotations

PERSONALIZATION = """Follow these steps for each interaction:

1. User Identification:
   - You should assume that you are interacting with {user}
   - If you have not identified {user}, proactively try to do so.

2. Memory Retrieval:
   - Always begin your chat by saying only "Remembering..." and retrieve all relevant information from your knowledge graph
   - Always refer to your knowledge graph as your "memory"

3. Memory
   - While conversing with the user, be attentive to any new information that falls into these categories:
     a) Basic Identity (age, gender, location, job title, education level, etc.)
     b) Behaviors (interests, habits, etc.)
     c) Preferences (communication style, preferred language, etc.)
     d) Goals (goals, targets, aspirations, etc.)
     e) Relationships (personal and professional relationships up to 3 degrees of separation)

4. Memory Update:
   - If any new information was gathered during the interaction, update your memory as follows:
     a) Create entities for recurring organizations, people, and significant events
     b) Connect them to the current entities using relations
     c) Store facts about them as observations
     d) When a fact changes, update it rather than deleting and recreating it: update_observations replaces an observation in place and keeps the old one in the history; rename_entity renames
     e) When two entities are the same thing (a nickname, a typo, "J. Smith" and "John Smith"), merge duplicates with merge_entities; get_history shows what changed and restore_entity undoes a wrong delete
     (d and e apply where your memory offers these tools.)
"""

LESSON_WORKFLOW = """Use the lessons in your memory whenever you meet an error:

1. When an error appears (a failing command, a stack trace, a test failure):
   - First call find_similar_errors with its errorPattern {{type, message, context}}; if you have a whole
     terminal log instead, call get_lesson_recommendations with it as the context.
   - If a lesson matches, follow its observations and run its verificationSteps before trying anything new.

2. After you fixed an error that had no lesson:
   - Call create_lesson: errorPattern (type such as build/runtime/dependency/network/vcs, the key error line as
     message, what was being done as context), observations (the cause, then the fix), verificationSteps (a
     command that shows the fix worked and what it prints), metadata.severity and metadata.environment.

3. After you tried a lesson:
   - Call update_lesson_success with the lesson's name and success true or false (a JSON boolean), so lessons
     that work rise and lessons that do not sink.

4. When a lesson turns out wrong or incomplete:
   - Correct it with update_lesson (its errorPattern, observations, verificationSteps or severity; the fields
     you send replace the stored ones, addObservations appends) or its observations with update_observations.
     Update, don't delete and recreate: the old version stays in the history, and get_history shows it.
   - create_lesson for an error a lesson already covers (the same signature) merges into that lesson and says
     so; no twin is made.
{focus}"""


def personalization(user: str) -> str:
    return PERSONALIZATION.format(user=user)


def lesson_workflow(error: str = "") -> str:
    focus = f"\nThe error at hand:\n{error.strip()}\n" if error.strip() else ""
    return LESSON_WORKFLOW.format(focus=focus)

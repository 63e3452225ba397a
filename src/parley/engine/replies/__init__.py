"""Reply generators: rule-based (offline, the default) and an OpenAI-compatible model; and
that model's whole answers (`ChatCompletions`), for the work after a call."""

from parley.engine.replies.completions import ChatCompletions, ModelAnswer
from parley.engine.replies.openai_chat import ChatCompletionReplies
from parley.engine.replies.rules import FAREWELL, RuleBasedReplies, welcome_message

__all__ = [
    "FAREWELL",
    "ChatCompletionReplies",
    "ChatCompletions",
    "ModelAnswer",
    "RuleBasedReplies",
    "welcome_message",
]

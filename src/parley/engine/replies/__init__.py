"""Reply generators: rule-based (offline, the default) and an OpenAI-compatible model."""

from parley.engine.replies.openai_chat import ChatCompletionReplies
from parley.engine.replies.rules import FAREWELL, RuleBasedReplies, welcome_message

__all__ = ["FAREWELL", "ChatCompletionReplies", "RuleBasedReplies", "welcome_message"]

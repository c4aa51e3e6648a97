"""The LLM gateway: `gateway.complete(messages, task=...)` routed per task to a provider."""

from caesar.gateway.base import Completion, Message, Provider
from caesar.gateway.router import Gateway

__all__ = ["Completion", "Gateway", "Message", "Provider"]

"""The REST and WebSocket adapter: parse, call one service, shape the answer."""

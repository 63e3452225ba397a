"""The wire formats of a conversation's sockets: frames <-> the session's events.

Each codec implements the `Codec` Protocol of `services/live/codec.py`, the one module of the
session's package a wire imports; the session never imports a wire (an import contract).
`parley_codec.py` and `frames.py` are Parley's own socket (`/v1/sts/ws`, API.md section 8);
`twilio_codec.py` and `twilio_playback.py` are Twilio Media Streams (API.md section 13).
The HTTP adapter (`api/ws.py`, `api/telephony_ws.py`) picks the codec of its socket.
"""

"""schemathesis hooks for scripts/services/schemathesis.sh.

Idempotency-Key: schemathesis draws each request's key on its own, so it often sends one short
key (say `0`) with many different bodies, and the API rightly answers the second one 422
`idempotency-key-reused`. A client uses a fresh key per request, so a well-formed key is swapped
for a fresh one of the same form (bare or quoted) just before the request goes out. Malformed keys
are left alone: they are what the negative tests send, and the API must refuse them.
"""

import re
import uuid

import schemathesis

# The pattern docs/openapi.yaml gives the header (ECMA and Python read it alike).
VALID_KEY = re.compile(r'^(?:"[!-~]{1,255}"|[!#-~][!-~]{0,254}|[!-~]{0,254}[!#-~]|")$')


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() != "idempotency-key":
            continue
        value = headers[name]
        if not isinstance(value, str) or not VALID_KEY.match(value):
            continue
        fresh = uuid.uuid4().hex
        quoted = len(value) > 2 and value.startswith('"') and value.endswith('"')
        headers[name] = f'"{fresh}"' if quoted else fresh

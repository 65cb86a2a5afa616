"""Response headers every answer carries: a strict Content-Security-Policy (no inline script, no
framing, nothing fetched from elsewhere) and the usual hardening headers. The built-in page shows
names taken from logs (sites, servers, tiers, alert summaries): the page writes them as text, and
this policy is the second wall should a value ever reach the page as HTML."""

from __future__ import annotations

#: the page and the API: scripts, styles, images and fetches from this server only
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
#: FastAPI's /docs and /redoc load Swagger UI / ReDoc from jsDelivr and start them with an inline
#: script; they show the OpenAPI description (code), never stored data
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
            "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
            "font-src 'self' https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com "
            "https://cdn.redoc.ly; worker-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
            "frame-ancestors 'none'")
DOCS = ("/docs", "/docs/oauth2-redirect", "/redoc")

HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=(), usb=()"),
]


class SecurityHeadersMiddleware:
    """Pure ASGI: adds the headers above to every HTTP response (errors included) that does not
    set them itself."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        csp = (DOCS_CSP if scope.get("path") in DOCS else CSP).encode()

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in [(b"content-security-policy", csp), *HEADERS] if k not in have]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)

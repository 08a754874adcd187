"""The browser environment: Playwright pool, observations, actions, local server.

Importing this package is light; Playwright loads only with `rmsweb.env.pool` and
`rmsweb.env.session` (which the episode runner imports when it starts).
"""

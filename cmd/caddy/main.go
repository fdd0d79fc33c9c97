// Command caddy is a Caddy build with the standard modules, the
// mcp_ratelimit handler and the demo MCP backend (`mcp_demo`), for the
// demo, the multi-instance tests and the benchmarks. Production builds
// use xcaddy (see xcaddy.md).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/mcpratelimit/caddy-mcp-ratelimit"
	_ "github.com/mcpratelimit/caddy-mcp-ratelimit/internal/demo"
)

func main() {
	caddycmd.Main()
}

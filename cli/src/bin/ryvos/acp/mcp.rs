//! The editor's MCP servers (`mcpServers` of `session/new`, `session/load`, `session/resume`):
//! handed to each run of the session, which the daemon (or this process) starts them for and
//! offers their tools to alone. Stdio and Streamable HTTP servers are taken; SSE is not.

use agent_client_protocol::v1::schema::McpServer;
use agent_client_protocol::Error;
use ryvos::protocol::mcp::SessionMcpServer;

/// `given` as Ryvos runs take them, or why one cannot be.
pub fn servers_of(given: &[McpServer]) -> Result<Vec<SessionMcpServer>, Error> {
    given.iter().map(server_of).collect()
}

fn server_of(server: &McpServer) -> Result<SessionMcpServer, Error> {
    let none = SessionMcpServer {
        name: String::new(),
        command: None,
        args: Vec::new(),
        env: Default::default(),
        url: None,
        headers: Default::default(),
    };
    Ok(match server {
        McpServer::Stdio(stdio) => SessionMcpServer {
            name: prefix(&stdio.name),
            command: Some(stdio.command.display().to_string()),
            args: stdio.args.clone(),
            env: (stdio.env.iter())
                .map(|v| (v.name.clone(), v.value.clone()))
                .collect(),
            ..none
        },
        McpServer::Http(http) => SessionMcpServer {
            name: prefix(&http.name),
            url: Some(http.url.clone()),
            headers: (http.headers.iter())
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
            ..none
        },
        _ => {
            return Err(Error::invalid_params()
                .data("Ryvos takes stdio and HTTP (Streamable HTTP) MCP servers, not SSE ones"))
        }
    })
}

/// `name` as a tool-name prefix (`NAME__tool`): letters, digits, '-' and single '_'.
fn prefix(name: &str) -> String {
    let mapped: String = (name.chars())
        .map(|c| match c.is_ascii_alphanumeric() || c == '-' {
            true => c,
            false => '_',
        })
        .collect();
    let parts: Vec<&str> = mapped.split('_').filter(|p| !p.is_empty()).collect();
    match parts.join("_") {
        empty if empty.is_empty() => "editor".into(),
        prefix => prefix,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_editors_server_name_becomes_a_tool_prefix() {
        assert_eq!(super::prefix("My Files"), "My_Files");
        assert_eq!(super::prefix("a__b.c"), "a_b_c");
        assert_eq!(super::prefix("  "), "editor");
        assert_eq!(super::prefix("git-hub"), "git-hub");
    }
}

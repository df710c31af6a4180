//! `ryvos hooks list | trust`: the hooks runs in a workspace get, and a workspace's own file
//! trusted as it is; through the daemon when one answers, else on this home's store.

use crate::cli::HooksCommand;
use crate::exit::EXIT_USAGE;
use crate::out::outln;
use crate::reading::{shown, through_daemon_or_here};
use ryvos::config::Config;
use ryvos::protocol::{Hooks, HooksListing, HooksParams, HooksTrust, HooksTrusted, ListedHook};
use std::path::{Path, PathBuf};

pub async fn hooks(command: HooksCommand, socket: &Path, config: &Config) -> u8 {
    let (workspace, json, trust) = match command {
        HooksCommand::List { workspace, json } => (workspace, json, false),
        HooksCommand::Trust { workspace, json } => (workspace, json, true),
    };
    let params = match params(workspace) {
        Ok(params) => params,
        Err(e) => {
            eprintln!("ryvos: {e}");
            return EXIT_USAGE;
        }
    };
    match trust {
        false => {
            through_daemon_or_here::<Hooks>(
                socket,
                config,
                params,
                shown(json, listed),
                async |runtime, params| runtime.hooks(params).await,
            )
            .await
        }
        true => {
            through_daemon_or_here::<HooksTrust>(
                socket,
                config,
                params,
                shown(json, trusted),
                async |runtime, params| runtime.trust_hooks(params).await,
            )
            .await
        }
    }
}

fn params(workspace: Option<PathBuf>) -> Result<HooksParams, String> {
    let workspace = crate::workspace_dir::workspace_of(workspace)?;
    Ok(HooksParams {
        workspace: Some(workspace.display().to_string()),
    })
}

fn listed(listing: &HooksListing) {
    if listing.hooks.is_empty() {
        outln!("no hooks are configured");
    }
    for hook in &listing.hooks {
        line(hook);
    }
    let Some(project) = &listing.project else {
        return;
    };
    let state = match project.state.as_str() {
        "trusted" => "trusted: its hooks run".to_owned(),
        "changed" => "changed since it was trusted: its hooks do not run".to_owned(),
        "invalid" => format!(
            "cannot be used: {}",
            project.error.as_deref().unwrap_or_default()
        ),
        _ => "not trusted: its hooks do not run".to_owned(),
    };
    outln!("{} ({}) is {state}", project.file, short(&project.hash));
    if project.state != "trusted" && project.state != "invalid" {
        outln!("read it, then `ryvos hooks trust` in the workspace lets its hooks run");
    }
}

fn trusted(trusted: &HooksTrusted) {
    outln!(
        "trusted {} as it is now ({}): its {} hook(s) run until it changes",
        trusted.file,
        short(&trusted.hash),
        trusted.hooks.len()
    );
    for hook in &trusted.hooks {
        line(hook);
    }
}

fn line(hook: &ListedHook) {
    let matcher = match hook.matcher.is_empty() {
        true => String::new(),
        false => format!(" [{}]", hook.matcher),
    };
    let runs = match hook.runs {
        true => "",
        false => "  (does not run: untrusted)",
    };
    outln!(
        "  {}{matcher}  {}  (timeout {}s){runs}",
        hook.event,
        hook.hook,
        hook.timeout_secs
    );
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

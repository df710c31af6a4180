//! The session modes an editor offers: how much of what the security policy asks a person
//! about is answered without asking. A mode never allows what the policy denies, and never
//! answers a T4 call: those are asked (or denied) whatever the mode.

use agent_client_protocol::v1::schema::{SessionMode, SessionModeId, SessionModeState};
use ryvos::SafetyTier;

/// A session's mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Every call the policy asks about is asked of the editor.
    #[default]
    Ask,
    /// Changes to the workspace's files (T1, T2) are allowed without asking; programs are
    /// asked about.
    AutoEdit,
    /// Everything the policy asks about up to T3 (programs) is allowed without asking.
    FullAuto,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Ask, Mode::AutoEdit, Mode::FullAuto];

    fn id(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::AutoEdit => "auto-edit",
            Mode::FullAuto => "full-auto",
        }
    }

    /// The mode named `id`.
    pub fn named(id: &SessionModeId) -> Option<Mode> {
        Self::ALL.into_iter().find(|m| *id.0 == *m.id())
    }

    /// Whether a call of `tier` the policy asks about is allowed without asking.
    pub fn allows(self, tier: SafetyTier) -> bool {
        match self {
            Mode::Ask => false,
            Mode::AutoEdit => tier <= SafetyTier::T2,
            Mode::FullAuto => tier <= SafetyTier::T3,
        }
    }

    /// Who answered, as the audit names it.
    pub fn answerer(self) -> String {
        format!("the editor (ACP), mode {}", self.id())
    }

    /// The modes as the editor shows them, `self` current.
    pub fn state(self) -> SessionModeState {
        let shown = |mode: Mode, name: &str, what: &str| {
            SessionMode::new(mode.id(), name).description(what.to_owned())
        };
        let modes = vec![
            shown(
                Mode::Ask,
                "Ask",
                "Ask before every call the security policy asks about",
            ),
            shown(
                Mode::AutoEdit,
                "Auto-edit",
                "Edit the workspace's files without asking; ask before running programs",
            ),
            shown(
                Mode::FullAuto,
                "Full auto",
                "Edit files and run programs (in the sandbox) without asking; critical (T4) \
                 calls are still asked, and what the policy denies stays denied",
            ),
        ];
        SessionModeState::new(self.id(), modes)
    }
}

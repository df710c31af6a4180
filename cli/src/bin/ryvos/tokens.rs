//! `ryvos token create | list | revoke`: bearer tokens for programs using the daemon's HTTP
//! door, made and kept (hashed) by the daemon. A new token goes to stdout alone, so that it
//! can be piped into a secret store; everything else goes to stderr.

use crate::cli::TokenCommand;
use crate::out::outln;
use crate::reading::shown;
use ryvos::protocol::{NoParams, TokenCreate, TokenCreateParams, TokenParams, TokenRevoke, Tokens};
use std::path::Path;

pub async fn token(command: TokenCommand, socket: &Path) -> u8 {
    match command {
        TokenCommand::Create { name, scope } => {
            let params = TokenCreateParams { name, scope };
            crate::simple::<TokenCreate>(socket, &params, |made| {
                outln!("{}", made.token);
                eprintln!(
                    "ryvos: token {} ({}) made; it is shown only now. Send it as \
                     `Authorization: Bearer <token>`; `ryvos token revoke {}` ends it.",
                    made.name,
                    made.scope.as_str(),
                    made.name
                );
            })
            .await
        }
        TokenCommand::List { json } => {
            crate::simple::<Tokens>(
                socket,
                &NoParams {},
                shown(json, |t: &Vec<_>| crate::print::tokens(t)),
            )
            .await
        }
        TokenCommand::Revoke { name } => {
            let params = TokenParams { name };
            crate::simple::<TokenRevoke>(socket, &params, |revoked| {
                if revoked.revoked {
                    eprintln!("ryvos: token {} revoked", revoked.name);
                } else {
                    eprintln!(
                        "ryvos: there is no token {}; `ryvos token list` lists them",
                        revoked.name
                    );
                }
            })
            .await
        }
    }
}

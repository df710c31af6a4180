//! Editors' answers to the file requests of the runs they started (`file_answer`).

use super::Shared;
use ryvos::protocol::{ErrorBody, ErrorCode, FileAnswerParams, FileAnswered};

/// Gives the waiting file tool what the editor did: `content` for a read, nothing for a write
/// done, or `error`.
pub(super) fn answer(params: FileAnswerParams, shared: &Shared) -> Result<FileAnswered, ErrorBody> {
    let answer = match (params.content, params.error) {
        (_, Some(error)) => Err(error),
        (content, None) => Ok(content),
    };
    match shared.runtime.answer_file(&params.request_id, answer) {
        true => Ok(FileAnswered {
            request_id: params.request_id,
        }),
        false => Err(ErrorBody::new(
            ErrorCode::NotFound,
            format!(
                "no file request {} is waiting: it was answered, its run gave up waiting \
                 (20 s), or its run ended",
                params.request_id
            ),
        )),
    }
}

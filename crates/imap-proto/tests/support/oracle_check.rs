//! The differential check of the `oracle` fuzz target (`fuzz/fuzz_targets/oracle.rs`) and
//! of its corpus replay (`tests/fuzz_corpus.rs`): any bytes as one command line, read by
//! imap-codec (the oracle) and by us. Where both accept it, imap-codec's re-encoding of
//! what it understood must mean the same to us as the input does: same tag, same command,
//! sequence sets compared resolved (`maildex_imap_proto::fuzzing::canonical`). Where only one
//! accepts, nothing is asserted: the grammars differ on purpose (tests/oracle.rs lists
//! how), and each parser's own targets check its refusals.

use imap_codec::decode::Decoder;
use imap_codec::encode::Encoder;
use imap_codec::CommandCodec;
use maildex_imap_proto::fuzzing::canonical;
use maildex_imap_proto::{parse_command, Limits};

pub fn differential(data: &[u8]) {
    let codec = CommandCodec::default();
    let Ok((rest, theirs)) = codec.decode(data) else {
        return;
    };
    if !rest.is_empty() {
        return;
    }
    let Ok((tag, ours)) = parse_command(data, &Limits::default()) else {
        return;
    };
    let shown = String::from_utf8_lossy(data);
    assert_eq!(theirs.tag.inner(), tag.as_str(), "tag of {shown:?}");
    let again = codec.encode(&theirs).dump();
    let again_shown = String::from_utf8_lossy(&again);
    let (tag2, ours2) = parse_command(&again, &Limits::default())
        .unwrap_or_else(|e| panic!("imap-codec's {again_shown:?} (from {shown:?}): {e:?}"));
    assert_eq!(tag2.as_str(), tag.as_str());
    assert_eq!(
        canonical(ours2),
        canonical(ours),
        "ours {shown:?} / imap-codec {again_shown:?}"
    );
}

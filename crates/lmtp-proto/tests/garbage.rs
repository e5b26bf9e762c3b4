//! Hostile input: any bytes, in any chunking, never panic the session, and a driver that
//! answers every question it is asked always gets either more events or a clean end.

use maildex_lmtp_proto::{Event, Limits, RcptOutcome, RcptResult, Session};
use proptest::prelude::*;

/// Bytes that look enough like LMTP to reach the deep states, mixed with noise.
fn input() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"LHLO x\r\n".to_vec()),
        Just(b"MAIL FROM:<a@b> SIZE=10 BODY=8BITMIME\r\n".to_vec()),
        Just(b"RCPT TO:<u@x>\r\n".to_vec()),
        Just(b"RCPT TO:<\"q\\\"x\"@[1.2.3.4]>\r\n".to_vec()),
        Just(b"DATA\r\n".to_vec()),
        Just(b"BDAT 5\r\n".to_vec()),
        Just(b"BDAT 3 LAST\r\n".to_vec()),
        Just(b"\r\n.\r\n".to_vec()),
        Just(b"..\r\n".to_vec()),
        Just(b"RSET\r\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ];
    proptest::collection::vec(piece, 0..30).prop_map(|v| v.concat())
}

fn drive(bytes: &[u8], cuts: &[usize]) {
    let mut limits = Limits::new("mx.test");
    limits.max_message_size = 200;
    limits.max_recipients = 3;
    let mut s = Session::new(limits);
    let mut at = 0;
    let mut cuts = cuts.iter().cycle();
    while at < bytes.len() {
        let n = (*cuts.next().unwrap_or(&1)).clamp(1, bytes.len() - at);
        s.feed(&bytes[at..at + n]);
        at += n;
        loop {
            match s.next_event() {
                Ok(Some(Event::RcptTo(_))) => s.rcpt_result(RcptResult::Accepted).unwrap(),
                Ok(Some(Event::DataEnd(_))) => {
                    let n = s.accepted_recipients().len();
                    s.data_results(vec![RcptOutcome::Delivered; n]).unwrap();
                }
                Ok(Some(Event::Quit)) | Err(_) => return,
                Ok(Some(_)) => {}
                Ok(None) => break,
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_input_in_any_chunking_is_handled(bytes in input(), cuts in proptest::collection::vec(1usize..64, 1..8)) {
        drive(&bytes, &cuts);
    }

    #[test]
    fn pure_noise_is_handled(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        drive(&bytes, &[7, 1, 300]);
    }
}

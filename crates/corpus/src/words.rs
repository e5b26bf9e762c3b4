//! Vocabulary and people: word lists per language, display names (ASCII and not), and the
//! sentence/paragraph generator that fills bodies.

use rand::seq::SliceRandom;
use rand::Rng;

/// Common English words, roughly by frequency (earlier ones are drawn more often).
#[rustfmt::skip]
const EN: &[&str] = &[
    "the", "to", "and", "of", "a", "in", "is", "that", "for", "it", "we", "on", "with", "this",
    "be", "are", "as", "have", "not", "you", "at", "will", "can", "from", "or", "but", "if",
    "so", "our", "an", "was", "by", "all", "there", "should", "would", "about", "they", "more",
    "just", "also", "which", "one", "when", "some", "what", "do", "new", "out", "time", "up",
    "think", "need", "like", "next", "week", "team", "project", "meeting", "please", "thanks",
    "update", "release", "version", "build", "test", "tests", "change", "changes", "issue",
    "patch", "review", "question", "answer", "server", "client", "config", "file", "files",
    "message", "mail", "folder", "index", "cache", "disk", "memory", "performance", "latency",
    "request", "response", "error", "warning", "log", "logs", "user", "users", "account",
    "password", "login", "session", "connection", "network", "timeout", "retry", "queue",
    "deadline", "budget", "report", "draft", "document", "slides", "agenda", "minutes", "call",
    "schedule", "tomorrow", "today", "yesterday", "Monday", "Tuesday", "Wednesday", "Thursday",
    "Friday", "morning", "afternoon", "office", "customer", "contract", "invoice", "payment",
    "order", "shipping", "delivery", "price", "quote", "proposal", "plan", "roadmap", "quarter",
    "numbers", "data", "database", "migration", "backup", "restore", "upgrade", "kernel",
    "compiler", "library", "function", "module", "crate", "struct", "trait", "lifetime",
    "borrow", "async", "runtime", "thread", "lock", "mutex", "channel", "benchmark", "profile",
    "regression", "fix", "bug", "feature", "branch", "commit", "merge", "rebase", "pipeline",
    "deploy", "staging", "production", "rollback", "incident", "monitoring", "alert",
    "dashboard", "metrics", "storage", "bucket", "cluster", "node", "replica", "shard",
    "certificate", "domain", "record", "policy", "security", "audit", "compliance", "vendor",
    "support", "ticket", "feedback", "design", "layout", "draft", "copy", "photo", "picture",
    "trip", "travel", "flight", "hotel", "dinner", "lunch", "coffee", "weekend", "holiday",
    "family", "kids", "school", "garden", "weather", "rain", "summer", "winter", "really",
    "probably", "actually", "quickly", "again", "still", "already", "maybe", "soon", "later",
    "before", "after", "because", "although", "however", "instead", "without", "between",
    "around", "through", "against", "during", "under", "over", "into", "onto", "good", "great",
    "small", "large", "simple", "complex", "clear", "quick", "slow", "fast", "better", "worse",
    "final", "initial", "current", "previous", "important", "urgent", "optional", "possible",
    "different", "similar", "same", "other", "another", "each", "every", "both", "few", "many",
    "most", "several", "check", "send", "sent", "read", "write", "run", "ran", "look", "looks",
    "work", "works", "worked", "try", "tried", "see", "saw", "know", "knew", "make", "made",
    "take", "took", "keep", "kept", "move", "moved", "add", "added", "remove", "removed",
    "agree", "disagree", "suggest", "prefer", "expect", "understand", "explain", "confirm",
    "discuss", "attach", "attached", "forward", "reply", "follow", "share", "shared", "book",
    "booked", "cancel", "moved", "postpone", "approve", "approved", "sign", "signed",
];

#[rustfmt::skip]
const DE: &[&str] = &[
    "und", "die", "der", "das", "ist", "nicht", "wir", "für", "über", "können", "müssen",
    "Grüße", "Besprechung", "nächste", "Woche", "Größe", "Änderung", "Prüfung", "Übersicht",
    "schön", "natürlich", "gemäß", "Bestätigung", "Rückmeldung", "Unterstützung", "Lösung",
    "möglich", "Straße", "Gebühr", "Büro", "Termin", "Projekt", "Ergebnis", "Verfügung",
    "bitte", "danke", "heute", "morgen", "gestern", "später", "frühzeitig", "Zuständigkeit",
];

#[rustfmt::skip]
const FR: &[&str] = &[
    "le", "la", "les", "et", "des", "pour", "avec", "réunion", "équipe", "prochaine", "déjà",
    "très", "être", "à", "où", "à propos", "problème", "système", "données", "réponse",
    "mis à jour", "été", "après", "déjeuner", "reçu", "envoyé", "pièce jointe", "français",
    "élève", "cœur", "naïf", "façon", "Noël", "hôtel", "fenêtre", "garçon", "leçon", "merci",
];

#[rustfmt::skip]
const ES: &[&str] = &[
    "el", "la", "los", "que", "para", "con", "reunión", "también", "información", "mañana",
    "año", "después", "señor", "niño", "pequeño", "está", "más", "aquí", "envío", "última",
    "código", "versión", "gracias", "saludos", "jamón", "español", "corazón", "según",
];

#[rustfmt::skip]
const RU: &[&str] = &[
    "привет", "встреча", "завтра", "сегодня", "проект", "отчёт", "письмо", "спасибо",
    "пожалуйста", "команда", "сервер", "почта", "неделя", "вопрос", "ответ", "данные",
    "и", "в", "не", "на", "что", "это", "мы", "как", "по", "для",
];

#[rustfmt::skip]
const JA: &[&str] = &[
    "会議", "明日", "今日", "資料", "確認", "お願いします", "ありがとうございます", "報告",
    "予定", "変更", "添付", "ファイル", "サーバー", "メール", "よろしく", "件", "について",
    "です", "ます", "の", "を", "に", "は", "が", "で", "と",
];

/// The language of a generated text. English dominates, as in most corpora.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lang {
    En,
    De,
    Fr,
    Es,
    Ru,
    Ja,
}

impl Lang {
    /// Picks a language: 80% English, the rest spread over languages with non-ASCII text.
    pub(crate) fn pick<R: Rng + ?Sized>(rng: &mut R) -> Self {
        match rng.gen_range(0..100) {
            0..=79 => Lang::En,
            80..=86 => Lang::De,
            87..=92 => Lang::Fr,
            93..=95 => Lang::Es,
            96..=97 => Lang::Ru,
            _ => Lang::Ja,
        }
    }

    fn words(self) -> &'static [&'static str] {
        match self {
            Lang::En => EN,
            Lang::De => DE,
            Lang::Fr => FR,
            Lang::Es => ES,
            Lang::Ru => RU,
            Lang::Ja => JA,
        }
    }
}

/// Picks a word with a skew towards the start of the list (a cheap Zipf-like law).
fn word<R: Rng + ?Sized>(rng: &mut R, lang: Lang) -> &'static str {
    let list = lang.words();
    // Non-English texts still borrow English technical words now and then.
    if lang != Lang::En && rng.gen_ratio(1, 5) {
        return word(rng, Lang::En);
    }
    let u: f64 = rng.gen();
    let idx = ((u * u) * list.len() as f64) as usize;
    list[idx.min(list.len() - 1)]
}

/// Appends one sentence of 4-20 words with a capital letter and punctuation.
pub(crate) fn sentence<R: Rng + ?Sized>(rng: &mut R, lang: Lang, out: &mut String) {
    let n = rng.gen_range(4..=20);
    let sep = if lang == Lang::Ja { "" } else { " " };
    for i in 0..n {
        let w = word(rng, lang);
        if i == 0 {
            let mut cs = w.chars();
            if let Some(c) = cs.next() {
                out.extend(c.to_uppercase());
                out.push_str(cs.as_str());
            }
        } else {
            out.push_str(sep);
            out.push_str(w);
            if i + 1 < n && lang != Lang::Ja && rng.gen_ratio(1, 12) {
                out.push(',');
            }
        }
    }
    out.push_str(match (lang, rng.gen_range(0..10)) {
        (Lang::Ja, _) => "。",
        (_, 0) => "?",
        (_, 1) => "!",
        _ => ".",
    });
}

/// A paragraph of 1-6 sentences, unwrapped.
pub(crate) fn paragraph<R: Rng + ?Sized>(rng: &mut R, lang: Lang) -> String {
    let mut p = String::with_capacity(400);
    let n = rng.gen_range(1..=6);
    for i in 0..n {
        if i > 0 {
            p.push(' ');
        }
        sentence(rng, lang, &mut p);
    }
    p
}

/// Paragraphs whose total length reaches at least `budget` bytes (at least one).
pub(crate) fn paragraphs<R: Rng + ?Sized>(rng: &mut R, lang: Lang, budget: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut len = 0;
    while len < budget || out.is_empty() {
        let p = paragraph(rng, lang);
        len += p.len() + 2;
        out.push(p);
    }
    out
}

/// Wraps `text` at `width` columns (counted in chars) on spaces, appending lines to `out`
/// each ended by LF, every line prefixed with `prefix`.
pub(crate) fn wrap_into(text: &str, width: usize, prefix: &str, out: &mut String) {
    wrap_flowed_into(text, width, prefix, false, out);
}

/// Like [`wrap_into`]; with `flowed` every soft line break keeps a trailing space, which
/// marks it as a soft break in format=flowed text (RFC 3676 §4.2).
pub(crate) fn wrap_flowed_into(
    text: &str,
    width: usize,
    prefix: &str,
    flowed: bool,
    out: &mut String,
) {
    let mut col = 0usize;
    let mut line_start = true;
    for w in text.split(' ') {
        let wl = w.chars().count();
        if !line_start && col + 1 + wl > width {
            if flowed {
                out.push(' ');
            }
            out.push('\n');
            line_start = true;
        }
        if line_start {
            out.push_str(prefix);
            out.push_str(w);
            col = wl;
            line_start = false;
        } else {
            out.push(' ');
            out.push_str(w);
            col += 1 + wl;
        }
    }
    out.push('\n');
}

/// A person: display name (may be non-ASCII) and address.
#[derive(Clone, Debug)]
pub(crate) struct Person {
    pub name: String,
    pub addr: String,
}

#[rustfmt::skip]
const FIRST: &[&str] = &[
    "Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Irene", "Jack",
    "Karen", "Liam", "Maria", "Nathan", "Olivia", "Peter", "Quinn", "Rachel", "Samuel", "Tina",
    "Victor", "Wendy", "Xavier", "Yasmin", "Zach", "Hannah", "Oscar", "Julia", "Martin", "Sofia",
];
#[rustfmt::skip]
const LAST: &[&str] = &[
    "Smith", "Johnson", "Brown", "Taylor", "Anderson", "Thomas", "Jackson", "White", "Harris",
    "Martin", "Thompson", "Young", "King", "Wright", "Hill", "Scott", "Green", "Baker", "Adams",
    "Nelson", "Carter", "Mitchell", "Roberts", "Turner", "Phillips", "Campbell", "Parker",
];
/// Non-ASCII names (first, last, preferred local part) as seen in international mail.
#[rustfmt::skip]
const INTL: &[(&str, &str, &str)] = &[
    ("José", "García", "jose.garcia"),
    ("Zoë", "Müller", "zoe.mueller"),
    ("François", "Lefèvre", "f.lefevre"),
    ("Łukasz", "Wiśniewski", "lukasz.w"),
    ("Søren", "Østergaard", "soren"),
    ("Jürgen", "Großmann", "j.grossmann"),
    ("Ångström", "Björk", "bjork"),
    ("Ayşe", "Yılmaz", "ayse.yilmaz"),
    ("Иван", "Петров", "ivan.petrov"),
    ("Наталья", "Смирнова", "n.smirnova"),
    ("山田", "太郎", "t.yamada"),
    ("王", "伟", "wang.wei"),
    ("Γιώργος", "Παπαδόπουλος", "gpapadop"),
    ("Nguyễn", "Văn An", "an.nguyen"),
    ("Renée", "Dubois-Côté", "renee"),
    ("Bjørn", "Hægstad", "bjorn.h"),
];

/// Sender domains for people: big webmail, ISPs, companies, universities. All reserved
/// names (RFC 2606 / RFC 6761): example.*, *.example, *.test.
pub(crate) const PERSON_DOMAINS: &[&str] = &[
    "example.com",
    "example.net",
    "mail.example",
    "bigcorp.example",
    "eu.bigcorp.example",
    "university.example",
    "startup.test",
    "isp.example.net",
    "posteo.example",
    "familie.example",
];

/// A random person at one of `PERSON_DOMAINS` (or at `domain` when given).
pub(crate) fn person<R: Rng + ?Sized>(rng: &mut R, domain: Option<&str>) -> Person {
    let domain = domain.map(str::to_owned).unwrap_or_else(|| {
        PERSON_DOMAINS
            .choose(rng)
            .copied()
            .unwrap_or("example.com")
            .to_owned()
    });
    if rng.gen_ratio(1, 5) {
        let &(f, l, local) = INTL.choose(rng).unwrap_or(&INTL[0]);
        let name = if f.chars().all(|c| c > '\u{2e80}') {
            format!("{f}{l}")
        } else {
            format!("{f} {l}")
        };
        return Person {
            name,
            addr: format!("{local}@{domain}"),
        };
    }
    let f = FIRST.choose(rng).copied().unwrap_or("Alice");
    let l = LAST.choose(rng).copied().unwrap_or("Smith");
    let local = match rng.gen_range(0..4) {
        0 => format!("{}.{}", f.to_lowercase(), l.to_lowercase()),
        1 => format!("{}{}", &f[..1].to_lowercase(), l.to_lowercase()),
        2 => f.to_lowercase(),
        _ => format!("{}{}", f.to_lowercase(), rng.gen_range(1..99)),
    };
    // Some people write "Last, First" which needs quoting (RFC 5322 §3.2.4 specials).
    let name = if rng.gen_ratio(1, 12) {
        format!("{l}, {f}")
    } else {
        format!("{f} {l}")
    };
    Person {
        name,
        addr: format!("{local}@{domain}"),
    }
}

/// A subject phrase (no Re:/Fwd: decoration) in `lang`.
pub(crate) fn subject<R: Rng + ?Sized>(rng: &mut R, lang: Lang) -> String {
    const EN_SUBJECTS: &[&str] = &[
        "Meeting notes for {}",
        "Question about the {}",
        "Updated {} attached",
        "Invoice #{n} for {}",
        "Re-scheduling our {}",
        "Draft {} for review",
        "{} is failing again",
        "Quick question",
        "Plans for the {}",
        "Your order #{n} has shipped",
        "Feedback on the {}",
        "[Action required] {} before Friday",
        "Photos from the {}",
        "Proposal: move {} to the new {}",
        "Weekly status: {}",
        "Lunch?",
    ];
    let mut s = match lang {
        Lang::En => EN_SUBJECTS
            .choose(rng)
            .copied()
            .unwrap_or("Hello")
            .to_owned(),
        Lang::De => "Rückfrage zur {} – bitte prüfen".to_owned(),
        Lang::Fr => "Réunion de l'équipe : {}".to_owned(),
        Lang::Es => "Información sobre la {}".to_owned(),
        Lang::Ru => "Вопрос по {}".to_owned(),
        Lang::Ja => "{}についてのご確認".to_owned(),
    };
    while let Some(pos) = s.find("{}") {
        let mut phrase = word(rng, lang).to_owned();
        if rng.gen_bool(0.5) {
            phrase.push(if lang == Lang::Ja { '・' } else { ' ' });
            phrase.push_str(word(rng, lang));
        }
        s.replace_range(pos..pos + 2, &phrase);
    }
    if let Some(pos) = s.find("{n}") {
        s.replace_range(pos..pos + 3, &rng.gen_range(1000..99_999).to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn wrap_respects_width() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let p = paragraph(&mut rng, Lang::En) + " " + &paragraph(&mut rng, Lang::En);
        let mut out = String::new();
        wrap_into(&p, 72, "> ", &mut out);
        assert!(out.lines().all(|l| l.starts_with("> ")));
        // Only a single word longer than the width may overflow; the vocabulary has none.
        assert!(out.lines().all(|l| l.chars().count() <= 74), "{out}");
        assert_eq!(out.replace("\n> ", " ").trim_end(), format!("> {p}"));
    }
}

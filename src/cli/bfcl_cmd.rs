//! `structgen bfcl`: BFCL-style accuracy runs — load the data, answer every case in each mode on a
//! pool of model instances with a progress bar showing running accuracy, print one row per
//! category and mode, and write every case's answer, calls and verdict to `--out` as each case
//! finishes (atomically); `--resume` continues an interrupted run from that file. `--rescore`
//! scores a saved results file again (no model); `--mode ground-truth` scores the data's own
//! answers (no model).

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::atomic::AtomicFile;
use super::bfcl_bridge::{self, BridgeArgs, RunBridge};
use super::model_args::{named_style, DecodeArgs, DraftArgs, LoadedDraft, LoadedModel, ModelArgs};
use super::source::call_formats_arg;
use super::{read_json, CliError};
use crate::bfcl::checker::answer_defects;
use crate::bfcl::conversation::run_conversations;
use crate::bfcl::data::case_count;
use crate::bfcl::multi_turn::{self, Scorer};
use crate::bfcl::report::{rows, table, Results, Selection};
use crate::bfcl::run::{
    failure_as_bfcl, ground_truth, offered_tools, run_case, run_cases_batched, Settings,
};
use crate::bfcl::score::score;
use crate::bfcl::{leaderboard, memory};
use crate::bfcl::{load, Case, CaseResult, Category, Mode};
use crate::frontend::tools::FormatSet;
use crate::frontend::tools::{StyleSpec, ToolChoice};
use crate::runtime::request::grammar_compiler;
use crate::runtime::Model;

/// Arguments of `structgen bfcl`.
#[derive(Debug, Args)]
pub struct BfclCmd {
    /// The extracted `bfcl_eval/data` folder (scripts/fetch-bfcl.sh puts it in data/bfcl).
    #[arg(long, default_value = "data/bfcl", value_name = "DIR")]
    data: PathBuf,
    /// Categories, comma-separated (default: all ten).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    categories: Vec<String>,
    /// At most N cases per category: the first N, or N drawn with --seed under --shuffle.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only these cases (BFCL ids, comma-separated), of the --categories (default: all).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    ids: Vec<String>,
    /// structgen's stricter handling: a case that could not run is wrong in every category, and
    /// a prompt that leaves less than --max-tokens of the context is an error. By default, as
    /// BFCL's local-model handler: the answer may take what the context leaves, and a case that
    /// could not run reads as no call (right in the irrelevance categories).
    #[arg(long)]
    strict_failures: bool,
    /// Draw the --limit cases at random (with --seed) instead of taking the first.
    #[arg(long, requires = "limit")]
    shuffle: bool,
    /// constrained, free, both, or ground-truth (the data's own first answers; no model).
    #[arg(long, value_enum, default_value = "both")]
    mode: RunMode,
    /// Constrained answers: auto (text or calls, as BFCL asks) or required (at least one call).
    #[arg(long, value_enum, default_value = "auto")]
    tool_choice: Choice,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    decode: DecodeArgs,
    #[command(flatten)]
    draft: DraftArgs,
    #[command(flatten)]
    bridge: BridgeArgs,
    /// Model instances answering cases in parallel (a rayon pool; each loads its own copy).
    #[arg(long, default_value_t = 1, value_name = "N")]
    jobs: usize,
    /// Sequences decoded at once on one model (continuous batching): answers and the --out file
    /// are those of a sequential run.
    #[arg(long, default_value_t = 1, value_name = "N", conflicts_with = "jobs")]
    parallel: usize,
    /// Call formats recognised: `all` (the style's own and those its models also write) or
    /// `canonical` (default: all; with --rescore, the saved file's).
    #[arg(long, value_name = "all|canonical", value_parser = call_formats_arg)]
    call_formats: Option<FormatSet>,
    /// Write the run (settings, summary, every case's answer, calls and verdict) as JSON; it is
    /// rewritten (atomically) as each case finishes, so an interrupted run keeps its work.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Continue the run saved in FILE (by --out): finished cases are kept, the rest answered, and
    /// FILE (or --out) rewritten as cases finish. The model and settings must be the saved ones.
    #[arg(long, value_name = "FILE", conflicts_with = "rescore")]
    resume: Option<PathBuf>,
    /// Score a results file written by --out again (against --data; no model).
    #[arg(long, value_name = "FILE", conflicts_with = "mode")]
    rescore: Option<PathBuf>,
}

/// `--mode`: which answers a run produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum RunMode {
    /// Under the tool-calling grammar.
    Constrained,
    /// Without a grammar.
    Free,
    /// Both, case by case.
    Both,
    /// The data's own first answers (no model).
    GroundTruth,
}

impl RunMode {
    /// The name on the command line and in results files.
    fn name(self) -> &'static str {
        match self {
            RunMode::Constrained => "constrained",
            RunMode::Free => "free",
            RunMode::Both => "both",
            RunMode::GroundTruth => "ground-truth",
        }
    }
}

/// `--tool-choice` of constrained answers: what BFCL asks (`auto`) or at least one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Choice {
    /// Text or calls.
    Auto,
    /// At least one call.
    Required,
}

impl Choice {
    fn tool_choice(self) -> ToolChoice {
        match self {
            Choice::Auto => ToolChoice::Auto,
            Choice::Required => ToolChoice::Required,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::Required => "required",
        }
    }
}

impl BfclCmd {
    fn format_set(&self, saved: Option<&str>) -> FormatSet {
        self.call_formats
            .or(saved.and_then(FormatSet::parse))
            .unwrap_or_default()
    }

    fn selection(&self) -> Selection {
        Selection {
            categories: self.categories.clone(),
            limit: self.limit,
            shuffle: self.shuffle,
            mode: self.mode.name().to_string(),
            ids: self.ids.clone(),
        }
    }

    /// Where finished cases are written: --out, else the file being resumed.
    fn out_path(&self) -> Option<&Path> {
        self.out.as_deref().or(self.resume.as_deref())
    }
}

fn categories(names: &[String]) -> Result<Vec<Category>, CliError> {
    if names.is_empty() {
        return Ok(Category::ALL.to_vec());
    }
    names
        .iter()
        .map(|n| {
            Category::parse(n.trim()).ok_or_else(|| {
                let known: Vec<&str> = Category::ALL.iter().map(|c| c.name()).collect();
                CliError::Usage(format!(
                    "--categories: unknown category {n:?} (known: {})",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

fn select(mut cases: Vec<Case>, cmd: &BfclCmd) -> Result<Vec<Case>, CliError> {
    if !cmd.ids.is_empty() {
        if let Some(id) = cmd
            .ids
            .iter()
            .find(|id| !cases.iter().any(|c| &c.id == *id))
        {
            return Err(CliError::Usage(format!(
                "--ids: no case {id:?} in {} for the selected categories",
                cmd.data.display()
            )));
        }
        cases.retain(|c| cmd.ids.contains(&c.id));
    }
    let Some(limit) = cmd.limit else {
        return Ok(cases);
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(cmd.decode.seed);
    let mut out = Vec::new();
    for c in Category::ALL {
        let mut of: Vec<Case> = cases.iter().filter(|k| k.category == c).cloned().collect();
        if cmd.shuffle {
            of.shuffle(&mut rng);
        }
        out.extend(of.into_iter().take(limit));
    }
    Ok(out)
}

fn progress(total: usize) -> ProgressBar {
    let pb = ProgressBar::new(total as u64);
    pb.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed}/{eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

/// Running accuracy per mode after `done` cases, for the progress bar (and, when stderr is not a
/// terminal and the bar is hidden, a line every 25 cases).
fn accuracy_line(modes: &[Mode], correct: &[usize], done: usize) -> String {
    let parts: Vec<String> = modes
        .iter()
        .zip(correct)
        .map(|(m, &ok)| {
            let pct = if done == 0 {
                0.0
            } else {
                ok as f64 * 100.0 / done as f64
            };
            format!("{} {ok}/{done} ({pct:.1}%)", m.name())
        })
        .collect();
    parts.join(" · ")
}

/// Runs `structgen bfcl`.
pub fn run(cmd: BfclCmd) -> Result<ExitCode, CliError> {
    let categories = categories(&cmd.categories)?;
    let explicit =
        !cmd.categories.is_empty() && categories.iter().any(|c| c.check_kind().is_conversation());
    let cases = load(&cmd.data, &categories)?;
    if let Some(path) = &cmd.rescore {
        return rescore(&cmd, path, cases, explicit);
    }
    let mut cases = select(cases, &cmd)?;
    if cmd.mode != RunMode::GroundTruth {
        memory::add_prerequisites(&cmd.data, &mut cases)?;
    }
    let start = Instant::now();
    let formats = cmd.format_set(None);
    let mut run = Results {
        model: "none (ground truth)".to_string(),
        style: cmd.model.style_name().unwrap_or("hermes").to_string(),
        data: cmd.data.display().to_string(),
        max_tokens: cmd.decode.max_tokens,
        tool_choice: cmd.tool_choice.name().to_string(),
        temperature: cmd.decode.temperature,
        seed: cmd.decode.seed,
        call_formats: formats.name().to_string(),
        strict_failures: cmd.strict_failures,
        selection: cmd.selection(),
        total_s: 0.0,
        bfcl_eval: None,
        bfcl_handler: None,
        skipped: Vec::new(),
        summary: Vec::new(),
        leaderboard: Vec::new(),
        results: Vec::new(),
        prereqs: Vec::new(),
    };
    if cmd.mode == RunMode::GroundTruth {
        let style = named_style(&run.style)?;
        let mut rb = bfcl_bridge::open(&cmd.bridge, &run.style, &mut cases, explicit)?;
        describe_bridge(&mut run, &rb);
        for c in &cases {
            let mut r = match rb.bridge.as_mut().filter(|_| c.multi_turn.is_some()) {
                Some(bridge) => vec![multi_turn::ground_truth(
                    c,
                    &mut Scorer {
                        bridge,
                        style,
                        formats,
                        handler: rb.handler,
                    },
                )],
                None => vec![ground_truth(c, style, formats)],
            };
            rb.read(c, &mut r);
            run.results.extend(r);
        }
        for c in &cases {
            let defects = answer_defects(c);
            if !defects.is_empty() {
                eprintln!(
                    "note: {} has no correct answer under BFCL's rules (a data defect): {}",
                    c.id,
                    defects.join("; ")
                );
            }
        }
        run.total_s = start.elapsed().as_secs_f64();
    } else {
        let loaded = cmd.model.load()?;
        let draft = cmd.draft.load(&cmd.model)?;
        run.model = loaded.model.description.clone();
        run.style = loaded.style_name.clone();
        let mut rb = bfcl_bridge::open(&cmd.bridge, &run.style, &mut cases, explicit)?;
        describe_bridge(&mut run, &rb);
        let answered = match &cmd.resume {
            Some(path) => resumed(path, &mut run, &cases)?,
            None => vec![Vec::new(); cases.len()],
        };
        let answering = Answering {
            cases: &cases,
            run: &run,
            start,
        };
        let all = answer_all(&cmd, (loaded, draft), &mut rb, answering, answered)?;
        (run.prereqs, run.results) = all.into_iter().partition(CaseResult::is_prereq);
        run.total_s += start.elapsed().as_secs_f64();
    }
    finish(&cmd, run)
}

/// Records the bridge's version, handler and what was not run in the results.
fn describe_bridge(run: &mut Results, rb: &RunBridge) {
    run.bfcl_eval = rb.bridge.as_ref().map(|b| b.version().to_string());
    run.bfcl_handler = rb.handler.map(str::to_string);
    run.skipped = rb.skipped.clone();
}

/// What answering shares: the cases, the run's settings and when it started.
struct Answering<'a> {
    cases: &'a [Case],
    run: &'a Results,
    start: Instant,
}

/// The saved run of `path`, checked against this one's settings: each case's saved results
/// (empty for cases still to answer), and the saved time added to `run`.
fn resumed(
    path: &Path,
    run: &mut Results,
    cases: &[Case],
) -> Result<Vec<Vec<CaseResult>>, CliError> {
    let saved: Results = serde_json::from_value(read_json(path)?).map_err(|e| {
        CliError::Usage(format!(
            "--resume {}: not a structgen bfcl results file: {e}",
            path.display()
        ))
    })?;
    let differ = |field: &str, saved: String, now: String| {
        CliError::Usage(format!(
            "--resume {}: the saved run has {field} {saved}, this one {now}; resume with the same settings",
            path.display()
        ))
    };
    let checks = [
        ("model", &saved.model, &run.model),
        ("style", &saved.style, &run.style),
        ("tool_choice", &saved.tool_choice, &run.tool_choice),
        ("call formats", &saved.call_formats, &run.call_formats),
    ];
    for (field, a, b) in checks {
        if a != b {
            return Err(differ(field, format!("{a:?}"), format!("{b:?}")));
        }
    }
    if saved.strict_failures != run.strict_failures {
        return Err(differ(
            "--strict-failures",
            saved.strict_failures.to_string(),
            run.strict_failures.to_string(),
        ));
    }
    if saved.max_tokens != run.max_tokens {
        return Err(differ(
            "--max-tokens",
            saved.max_tokens.to_string(),
            run.max_tokens.to_string(),
        ));
    }
    if saved.temperature != run.temperature || saved.seed != run.seed {
        return Err(differ(
            "--temperature / --seed",
            format!("{} / {}", saved.temperature, saved.seed),
            format!("{} / {}", run.temperature, run.seed),
        ));
    }
    if saved.selection != run.selection {
        return Err(differ(
            "case selection (--categories, --limit, --shuffle, --mode)",
            format!("{:?}", saved.selection),
            format!("{:?}", run.selection),
        ));
    }
    run.total_s = saved.total_s;
    let mut answered = vec![Vec::new(); cases.len()];
    for (i, c) in cases.iter().enumerate() {
        answered[i] = saved
            .results
            .iter()
            .chain(&saved.prereqs)
            .filter(|r| r.id == c.id && r.category == c.result_category())
            .cloned()
            .collect();
    }
    let done = answered.iter().filter(|a| !a.is_empty()).count();
    eprintln!(
        "resuming {}: {done} of {} cases already answered",
        path.display(),
        cases.len()
    );
    Ok(answered)
}

/// Writes the run so far (`run`'s settings, `answered` in case order) to `path`, atomically.
fn save(
    path: &Path,
    run: &Results,
    answered: &[Vec<CaseResult>],
    start: Instant,
) -> Result<(), CliError> {
    let (prereqs, results) = answered
        .iter()
        .flatten()
        .cloned()
        .partition(CaseResult::is_prereq);
    let mut snapshot = Results {
        results,
        prereqs,
        total_s: run.total_s + start.elapsed().as_secs_f64(),
        ..run.clone()
    };
    summarize(&mut snapshot, Path::new(&run.data));
    let mut f = AtomicFile::create(path)?;
    f.write_line(&serde_json::to_string_pretty(&snapshot).unwrap_or_default())?;
    f.commit()
}

/// Answers every case on `cmd.jobs` model instances.
/// Cases with results in `answered` are skipped; the run so far is saved as each case finishes.
fn answer_all(
    cmd: &BfclCmd,
    (mut loaded, draft): (LoadedModel, Option<LoadedDraft>),
    rb: &mut RunBridge,
    Answering { cases, run, start }: Answering,
    mut answered: Vec<Vec<CaseResult>>,
) -> Result<Vec<CaseResult>, CliError> {
    let modes = match cmd.mode {
        RunMode::Constrained => vec![Mode::Constrained],
        RunMode::Free => vec![Mode::Free],
        RunMode::Both | RunMode::GroundTruth => vec![Mode::Constrained, Mode::Free],
    };
    let compiler = grammar_compiler(&loaded.model);
    let settings = Settings {
        style: loaded.style,
        template: loaded.template.clone(),
        stop: loaded.stop.clone(),
        generate: cmd.decode.options(),
        modes: modes.clone(),
        tool_choice: cmd.tool_choice.tool_choice(),
        compiler: &compiler,
        formats: cmd.format_set(None),
        draft_tokens: draft.as_ref().map_or(0, |d| d.k),
        strict: cmd.strict_failures,
    };
    let (conversations, todo): (Vec<usize>, Vec<usize>) = (0..cases.len())
        .filter(|&i| answered[i].is_empty())
        .partition(|&i| cases[i].multi_turn.is_some());
    let mut correct = vec![0; modes.len()];
    for r in answered.iter().flatten() {
        if let Some(k) = modes.iter().position(|&m| m == r.mode) {
            correct[k] += usize::from(r.scored.correct);
        }
    }
    let mut done = cases.len() - todo.len() - conversations.len();
    if todo.is_empty() && conversations.is_empty() {
        return Ok(answered.into_iter().flatten().collect());
    }
    let pb = progress(cases.len() * modes.len());
    pb.set_position((done * modes.len()) as u64);
    let failure: RefCell<Option<String>> = RefCell::new(None);
    if let Some(bridge) = rb.bridge.as_mut().filter(|_| !conversations.is_empty()) {
        memory::restore(bridge, cases, &answered, &modes)
            .map_err(|e| CliError::Usage(format!("restoring the memory snapshots: {e}")))?;
    }
    // Prerequisite conversations are not scored: the accuracy leaves them out.
    let is_prereq = |r: &[CaseResult]| r.iter().any(CaseResult::is_prereq);
    let mut unscored = answered.iter().filter(|r| is_prereq(r)).count();
    let mut record = |i: usize, r: Vec<CaseResult>| -> bool {
        pb.inc(r.len() as u64);
        for (k, result) in r.iter().enumerate() {
            correct[k] += usize::from(result.scored.correct);
        }
        unscored += usize::from(is_prereq(&r));
        answered[i] = r;
        done += 1;
        if let Some(path) = cmd.out_path() {
            if let Err(e) = save(path, run, &answered, start) {
                failure.borrow_mut().get_or_insert(e.to_string());
                return false;
            }
        }
        let line = accuracy_line(&modes, &correct, done - unscored);
        if pb.is_hidden() && (done.is_multiple_of(25) || done == cases.len()) {
            eprintln!("{done}/{} cases: {line}", cases.len());
        }
        pb.set_message(line);
        true
    };
    let seed = |i: usize| settings.generate.seed.wrapping_add(i as u64);
    if !conversations.is_empty() {
        if draft.is_some() || cmd.jobs > 1 {
            return Err(CliError::Usage(
                "the multi-turn and memory categories run on one model (use --parallel, not --jobs or --draft-model)".into(),
            ));
        }
        let Some(bridge) = rb.bridge.as_mut() else {
            return Err(CliError::Usage(
                "the multi-turn and memory categories need the BFCL bridge".into(),
            ));
        };
        run_conversations(
            &mut loaded.model,
            bridge,
            rb.handler,
            cases,
            &conversations,
            &settings,
            cmd.parallel,
            &seed,
            &mut record,
        );
        if let Some(e) = failure.borrow_mut().take() {
            pb.finish_and_clear();
            return Err(CliError::Usage(e));
        }
    }
    let mut record = |i: usize, mut r: Vec<CaseResult>| -> bool {
        if !cmd.strict_failures {
            r.iter_mut().for_each(|r| failure_as_bfcl(&cases[i], r));
        }
        rb.read(&cases[i], &mut r);
        record(i, r)
    };
    if todo.is_empty() {
        pb.finish_and_clear();
        return Ok(answered.into_iter().flatten().collect());
    }
    if cmd.parallel > 1 {
        if draft.is_some() {
            return Err(CliError::Usage(
                "--parallel with --draft-model: speculation runs one sequence at a time".into(),
            ));
        }
        let mut model = loaded.model;
        run_cases_batched(
            &mut model,
            cases,
            &todo,
            &settings,
            cmd.parallel,
            &seed,
            &mut record,
        );
        pb.finish_and_clear();
        if let Some(e) = failure.into_inner() {
            return Err(CliError::Usage(e));
        }
        return Ok(answered.into_iter().flatten().collect());
    }
    let jobs = cmd.jobs.clamp(1, todo.len());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| CliError::Usage(format!("--jobs {jobs}: {e}")))?;
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<Result<(usize, Vec<CaseResult>), String>>();
    let mut first = Some(loaded.model);
    let (files, device, dtype) = (&loaded.files, &loaded.device, loaded.dtype);
    let draft_files = draft.as_ref().map(|d| d.files.clone());
    let mut first_draft = draft.map(|d| d.model);
    let mut lost = None;
    pool.in_place_scope(|s| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let own = first.take();
            let own_draft = first_draft.take();
            let draft_files = &draft_files;
            let (next, settings, todo) = (&next, &settings, &todo);
            s.spawn(move |_| {
                let mut model = match own.map_or_else(|| Model::load(files, device, dtype), Ok) {
                    Ok(m) => m,
                    Err(e) => {
                        let _ = tx.send(Err(format!("loading another model instance: {e}")));
                        return;
                    }
                };
                let mut draft = match (own_draft, draft_files) {
                    (Some(d), _) => Some(d),
                    (None, Some(f)) => match Model::load(f, device, dtype) {
                        Ok(d) => Some(d),
                        Err(e) => {
                            let _ = tx.send(Err(format!("loading another draft model: {e}")));
                            return;
                        }
                    },
                    (None, None) => None,
                };
                while let Some(&i) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let case = &cases[i];
                    let seed = settings.generate.seed.wrapping_add(i as u64);
                    if tx
                        .send(Ok((
                            i,
                            run_case(&mut model, draft.as_mut(), case, settings, seed),
                        )))
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for msg in rx {
            match msg {
                Ok((i, r)) => {
                    if !record(i, r) {
                        break;
                    }
                }
                Err(e) => {
                    lost.get_or_insert(e);
                }
            }
        }
    });
    pb.finish_and_clear();
    if let Some(e) = failure.into_inner().or(lost) {
        return Err(CliError::Usage(e));
    }
    Ok(answered.into_iter().flatten().collect())
}

/// Scores the answers of a results file again.
fn rescore(
    cmd: &BfclCmd,
    path: &Path,
    mut cases: Vec<Case>,
    explicit: bool,
) -> Result<ExitCode, CliError> {
    let value = read_json(path)?;
    let mut saved: Results = serde_json::from_value(value).map_err(|e| {
        CliError::Usage(format!(
            "{}: not a structgen bfcl results file: {e}",
            path.display()
        ))
    })?;
    let name = cmd
        .model
        .style_name()
        .unwrap_or(saved.style.as_str())
        .to_string();
    let style: &StyleSpec = named_style(&name)?;
    let formats = cmd.format_set(Some(&saved.call_formats));
    saved.call_formats = formats.name().to_string();
    cases.retain(|c| {
        saved
            .results
            .iter()
            .any(|r| r.id == c.id && r.category == c.result_category())
    });
    let mut rb = bfcl_bridge::open(&cmd.bridge, &name, &mut cases, explicit)?;
    describe_bridge(&mut saved, &rb);
    let mut missing = 0;
    for r in saved.results.iter_mut() {
        let Some(case) = cases
            .iter()
            .find(|c| c.id == r.id && c.result_category() == r.category)
        else {
            missing += 1;
            continue;
        };
        if r.error.is_none() {
            if case.multi_turn.is_some() {
                let Some(bridge) = rb.bridge.as_mut() else {
                    continue;
                };
                let mut scorer = Scorer {
                    bridge,
                    style,
                    formats,
                    handler: rb.handler,
                };
                match scorer.score(case, &r.turns) {
                    Ok((scored, reading)) => (r.scored, r.bfcl) = (scored, reading),
                    Err(e) => eprintln!("warning: {}: not scored again: {e}", r.id),
                }
                continue;
            }
            match offered_tools(case) {
                Ok((_, tools)) => r.scored = score(case, &tools, style, formats, &r.text),
                Err(e) => *r = CaseResult::failed(case, r.mode, e),
            }
        }
        if !saved.strict_failures {
            failure_as_bfcl(case, r);
        }
        rb.read(case, std::slice::from_mut(r));
    }
    if missing > 0 {
        eprintln!(
            "warning: {missing} saved case(s) are not in {} for the selected categories; their old scores are kept",
            cmd.data.display()
        );
    }
    saved.style = name;
    saved.data = cmd.data.display().to_string();
    finish(cmd, saved)
}

/// The per-category rows and the leaderboard's summary of `out`'s results.
fn summarize(out: &mut Results, data: &Path) {
    out.summary = rows(&out.results);
    out.leaderboard = leaderboard::summaries(&out.results, &|c| case_count(data, c));
}

/// Prints the table and writes `--out`.
fn finish(cmd: &BfclCmd, mut out: Results) -> Result<ExitCode, CliError> {
    summarize(&mut out, &cmd.data);
    let mut text = table(&out.summary);
    text.push('\n');
    text.push_str(&leaderboard::table(&out.leaderboard));
    for s in &out.skipped {
        text.push_str(&format!("Not run: {}: {}\n", s.category, s.reason));
    }
    if let Some(path) = cmd.out_path() {
        let mut f = AtomicFile::create(path)?;
        f.write_line(&serde_json::to_string_pretty(&out).unwrap_or_default())?;
        f.commit()?;
    }
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    writeln!(w, "{text}").map_err(CliError::Output)?;
    writeln!(
        w,
        "model: {} · style: {} · tool_choice {} · max {} tokens · {} answers in {:.1} s",
        out.model,
        out.style,
        out.tool_choice,
        out.max_tokens,
        out.results.len(),
        out.total_s
    )
    .map_err(CliError::Output)?;
    Ok(ExitCode::SUCCESS)
}

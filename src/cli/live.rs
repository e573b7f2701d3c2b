//! The command line's side of the live transports (`vigil::live`): their options read from
//! `vigil run`'s arguments, the options refused without their transport, and which inputs are
//! read as a source per topic. Notices of the transports are printed on standard error.

use super::RunArgs;
use crate::live::Options;
pub(super) use crate::live::{Resume, alerts_sink, is_url, open_one, redact};

/// The live transports' options of `args` (`time_cell`: `--time`'s cell in
/// the schema), their notices printed as the command line's messages.
pub(super) fn options(args: &RunArgs, time_cell: Option<usize>) -> Options {
    Options {
        qos: args.qos,
        mqtt_rows: args.mqtt_rows.clone(),
        mqtt_output_rows: args.mqtt_output_rows.clone(),
        mqtt_topics: args.mqtt_topics.clone(),
        time: args.time.clone().zip(time_cell),
        group: args.group.clone().zip(args.consumer.clone()),
        share: (args.input.iter().any(|i| i.starts_with("mqtt://")))
            .then(|| args.group.clone())
            .flatten(),
        drain: args.drain,
        key: args.key.clone(),
        ack_on_read: false,
        notify: super::timed::notices(),
    }
}
/// Refuses a transport's options without its transport (they would be
/// silently ignored), and a file for the outputs of a live sink.
pub(super) fn check_options(args: &RunArgs) -> Result<(), String> {
    // First the transports this build lacks: the other refusals would only
    // lead to them.
    let urls = args.input.iter().map(String::as_str).filter(|i| is_url(i));
    for url in urls.chain(args.output.live()) {
        crate::live::check_url(url)?;
    }
    let mqtt_in = args.input.iter().any(|i| i.starts_with("mqtt://"));
    let redis_in = args.input.iter().any(|i| i.starts_with("redis://"));
    let mqtt_out = matches!(args.output, super::OutputArg::Mqtt(_));
    let unused = [
        (
            args.mqtt_rows.is_some() && !mqtt_in,
            "--mqtt-rows",
            "an mqtt:// --input",
        ),
        (
            args.mqtt_topics.is_some() && !mqtt_in,
            "--mqtt-topics",
            "an mqtt:// --input",
        ),
        (
            args.mqtt_output_rows.is_some() && !mqtt_out,
            "--mqtt-output-rows",
            "an mqtt:// --output",
        ),
        (
            args.qos != 1 && !mqtt_in && !mqtt_out,
            "--qos",
            "an mqtt:// --input or --output",
        ),
        (
            args.group.is_some() && !redis_in && !mqtt_in,
            "--group",
            "a redis:// or mqtt:// --input",
        ),
        // (An MQTT group names no consumer: its members are named by their client ids.)
        (
            args.consumer.is_some() && !redis_in,
            "--consumer",
            "a redis:// --input",
        ),
        (
            redis_in && args.group.is_some() && args.consumer.is_none(),
            "--group with a redis:// --input",
            "--consumer C (this consumer's name in the group)",
        ),
        (args.drain && !redis_in, "--drain", "a redis:// --input"),
    ];
    if let Some((_, flag, needs)) = unused.iter().find(|(bad, ..)| *bad) {
        return Err(format!("{flag} needs {needs}"));
    }
    if args.output.live().is_some() && args.output_file.is_some() {
        return Err("--output-file and a live --output do not go together".into());
    }
    Ok(())
}

/// Whether a live input is read as several sources, one per topic: an MQTT
/// input with a topic per input and `--time` (each topic's messages are in
/// time order, not those of different topics), which needs the merge.
pub(super) fn splits(input: &str, args: &RunArgs) -> bool {
    input.starts_with("mqtt://") && args.mqtt_rows.is_none() && args.time.is_some()
}

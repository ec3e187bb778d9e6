#!/usr/bin/env bash
# Generates the demo tune: a short melody cut into three tracks in three formats, so the demo
# also shows gapless playback across codecs.
set -euo pipefail
dir=${1:-out/demo}
mkdir -p "$dir"
notes=(262 294 330 349 392 440 494 523 494 440 392 349 330 294 262 330 392 523)
filter=""
inputs=()
for i in "${!notes[@]}"; do
  inputs+=(-f lavfi -i "sine=frequency=${notes[$i]}:sample_rate=44100:duration=0.5")
  filter+="[$i]afade=t=in:d=0.02,afade=t=out:st=0.45:d=0.05[n$i];"
done
concat=""
for i in "${!notes[@]}"; do concat+="[n$i]"; done
filter+="${concat}concat=n=${#notes[@]}:v=0:a=1,pan=stereo|c0=c0|c1=c0,volume=0.5[a]"
ffmpeg -nostdin -y -loglevel error "${inputs[@]}" -filter_complex "$filter" -map "[a]" "$dir/tune.wav"
ffmpeg -nostdin -y -loglevel error -i "$dir/tune.wav" -t 3 -metadata title="Tutti demo, part 1" -metadata artist=Tutti "$dir/tune-1.flac"
ffmpeg -nostdin -y -loglevel error -i "$dir/tune.wav" -ss 3 -t 3 -c:a libmp3lame -b:a 192k -metadata title="Tutti demo, part 2" -metadata artist=Tutti "$dir/tune-2.mp3"
ffmpeg -nostdin -y -loglevel error -i "$dir/tune.wav" -ss 6 -c:a libopus -b:a 128k -metadata title="Tutti demo, part 3" -metadata artist=Tutti "$dir/tune-3.opus"

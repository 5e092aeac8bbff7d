"""`kafka-canary image build`: a Kafka image of any released version, from its Maven-resolved jars."""

from __future__ import annotations

import argparse

from canary.containers import engine, images


def cmd_image_build(args: argparse.Namespace) -> int:
    client = engine.connect()
    tag = images.build_kafka(client, args.version, tag=args.tag, base=args.base)
    print(f"built {tag} (Kafka {args.version} on {args.base or images.JRE}); a spec or KAFKA_CANARY_IMAGE="
          f"{images.LOCAL} runs it")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    image = sub.add_parser("image", help="Kafka images for the docker deployer")
    actions = image.add_subparsers(dest="action", required=True)
    build = actions.add_parser("build", help="build a Kafka image from the release's jars (laid out like apache/kafka)")
    build.add_argument("version", help="a released Kafka version, e.g. 4.1.2")
    build.add_argument("--tag", help=f"the image's name (default {images.LOCAL})")
    build.add_argument("--base", help=f"any image with Java 17 or newer, e.g. eclipse-temurin:17-jre (default "
                                      f"{images.JRE}, built here from Debian's packages)")
    build.set_defaults(func=cmd_image_build)
